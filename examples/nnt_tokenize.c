/* SPDX-License-Identifier: MIT */
/* nnt-tokenize: text files or directories -> one llm.c token file (16-bit, or 32-bit for
 * vocabularies above 65536) that nnt-train --data reads, or ids on stdout (--print).
 * Each file is encoded on its own (as nnt_data_open does) and the ids follow the input order.
 * A file is cut into chunks at line starts (after a newline, before a byte that is not white
 * space), which byte-level BPE pre-tokenizers never join across; the chunks are encoded on
 * --threads threads and written in order, so the output does not depend on the thread count.
 * A tokenizer that fails a probe of that property at start (Metaspace, Prepend normalizers)
 * gets one chunk per file. The file is written through nnt_token_writer (3): in place
 * atomically, or not at all.
 * See man/man1/nnt-tokenize.1. Exit status: 0 done, 1 error (library, files), 2 bad usage. */
#define _FILE_OFFSET_BITS 64
#define _POSIX_C_SOURCE 200809L
#include <nnt.h>

#include "cli.h"
#include "tokenize_jsonl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BATCH_BYTES (64u << 20) /* text read and encoded at a time (more when one file is) */

typedef struct opts {
    const char *json, *vocab, *merges, *out;
    int tokenizer;                /* TOK_*; -1: by the files given                         */
    int bits;                     /* BITS_*; -1: by the vocabulary                         */
    int print;
    int64_t threads, chunk;
    char **inputs;
    int ninputs;
    /* --jsonl: prompt/answer records (examples/tokenize_jsonl.c)                          */
    int jsonl, pack, pad;
    int preference;               /* --preference: preference records, a pair two rows     */
    int unpaired;                 /* --unpaired: unpaired preference records (KTO)         */
    int64_t num_labels;           /* --num-labels: classification records                  */
    int64_t pad_id;               /* --pad-id: the id rows are padded with (-1: the tokenizer's) */
    int problem;                  /* --problem-type: NNT_PROBLEM_* (records of values)     */
    const char *label_names;      /* --label-names: their labels by name                   */
    int64_t seq;
    int too_long;                 /* 0 refuse, 1 cut                                        */
    int loss;                     /* -1 unset, 0 answers, 1 all                             */
    int chat_template;            /* index in cli_chat_templates                            */
    const char *tokenizer_config;
    const char *chat_date;
} opts;

enum { TOK_BYTES, TOK_BPE, TOK_JSON };
enum { BITS_16, BITS_32 };
static const char *const tokenizers[] = {"bytes", "bpe", "json", NULL};
static const char *const token_bits[] = {"16", "32", NULL};
static const char *const too_long[] = {"refuse", "cut", NULL};
static const char *const losses[] = {"answers", "all", "assistant", NULL};

#define CLI_OFF(f) offsetof(opts, f)
static const cli_option table[] = {
    OPT_GROUP("Tokenizer:"),
    OPT_CHOICE("tokenizer", tokenizer, tokenizers, NULL, 0, "T", "bytes|bpe|json (default bytes; "
               "json with --tokenizer-json,\nbpe with --bpe-vocab and --bpe-merges)"),
    OPT_STR("tokenizer-json", json, NULL, 0, "FILE", "a Hugging Face tokenizer.json"),
    OPT_STR("bpe-vocab", vocab, NULL, 0, "FILE", NULL),
    OPT_STR("bpe-merges", merges, NULL, 0, "FILE", "GPT-2 vocab.json and merges.txt (also "
            "--vocab,\n--merges)"),
    OPT_ALIAS("vocab", "bpe-vocab"),
    OPT_ALIAS("merges", "bpe-merges"),
    OPT_GROUP("Output (one of --out and --print):"),
    OPT_STR("out", out, NULL, 0, "FILE", "an llm.c token file, written atomically (also -o)"),
    OPT_ALIAS("o", "out"),
    OPT_FLAG("print", print, 0, "the ids on standard output, separated by spaces"),
    OPT_CHOICE("token-bits", bits, token_bits, NULL, 0, "16|32", "the token file's kind (default "
               "16; 32 for vocabularies\nabove 65536)"),
    OPT_GROUP("Work:"),
    OPT_INT("threads", threads, 1, 256, "2", 0, "N", "encoding threads (default 2)"),
    OPT_INT("chunk-bytes", chunk, 1, 1 << 30, "1048576", 0, "N",
            "the size files are cut to for the threads (default\n1048576; the output does "
            "not depend on it)"),
    OPT_GROUP("Prompt/answer data (JSON Lines; --out only):"),
    OPT_FLAG("jsonl", jsonl, 0, "the INPUTs are JSON Lines of {\"text\"}, {\"prompt\",\n"
             "\"completion\"} or {\"messages\"} records; the file records\nwhich tokens count "
             "in the loss"),
    OPT_FLAG("preference", preference, 0, "the INPUTs are JSON Lines of preference records\n"
             "{\"prompt\", \"chosen\", \"rejected\"} (or {\"chosen\",\n\"rejected\"} "
             "sharing their prompt), TRL's DPO\nforms: each record's chosen and rejected "
             "sequences\nin two rows, for nnt-train --dpo-beta (implies\n--jsonl; not with "
             "--pack)"),
    OPT_FLAG("unpaired", unpaired, 0, "the INPUTs are JSON Lines of unpaired preference\n"
             "records {\"prompt\", \"completion\", \"label\": true|false},\nTRL's KTO form: "
             "each record in a row, its label the\nrow's value, for nnt-train --dpo-loss kto "
             "(implies\n--jsonl; not with --pack); or of preference records\n(as --preference), "
             "read unpaired as KTOTrainer does:\neach 1000 records' chosen rows (desirable), "
             "then\ntheir rejected ones"),
    OPT_INT("num-labels", num_labels, 1, 1 << 20, NULL, 0, "N", "the INPUTs are JSON Lines of "
            "classification records\n{\"text\", \"label\"} (labels 0 .. N - 1): each text "
            "then its\nlabel, the one target that counts, for nnt-train\n--num-labels N "
            "(implies --jsonl)"),
    OPT_CHOICE("problem-type", problem, cli_problem_types, "single_label_classification", 0,
               "P", "single_label_classification|regression|\nmulti_label_classification: "
               "with the other two\na record's label is N numbers (a number when N is\n1; "
               "multi-label: each in [0, 1]), carried by its\nrow, for nnt-train --problem-type "
               "P (text then one\ntarget that counts)"),
    OPT_STR("label-names", label_names, NULL, 0, "LIST", "names of the labels 0, 1, ... "
            "separated by commas:\na record's label may be one of them (a string), as\nwell "
            "as its index (implies --num-labels, their\ncount)"),
    OPT_INT("pad-id", pad_id, -1, 2147483647.0, "-1", 0, "ID", "the id rows are padded with "
            "(default: the\ntokenizer's pad_token, else eos_token, as TRL):\nnnt-train's "
            "--pad-id of a classifier or reward\nmodel, which it pools by (implies --jsonl)"),
    OPT_INT("seq", seq, 2, 2147483647.0, NULL, 0, "T", "rows of T tokens, nnt-train's --seq "
            "(needed with\n--jsonl)"),
    OPT_FLAG("pad", pad, 0, NULL),
    OPT_FLAG("pack", pack, 0, "one example a row (--pad, the default), or several\nwhole ones"),
    OPT_CHOICE("too-long", too_long, too_long, "refuse", 0, "refuse|cut",
               "an example longer than T (default refuse)"),
    OPT_CHOICE("chat-template", chat_template, cli_chat_templates, "auto", 0, "NAME",
               CLI_CHAT_TEMPLATE_LIST " for \"messages\"\n(default auto: the "
               "tokenizer_config.json's, when\nnnt knows it)"),
    OPT_CHOICE("loss", loss, losses, NULL, 0, "answers|all|assistant", "the tokens that count: "
               "the answers (the\ndefault: completions, assistant turns), all of\nthem, as "
               "TRL with completion_only_loss=False and\nno assistant_only_loss (conversations "
               "rendered\nas their published template renders them), or\nthe assistant turns "
               "alone, a conversational\ncompletion's tool responses not (TRL's\n"
               "assistant_only_loss)"),
    OPT_STR("chat-date", chat_date, NULL, 0, "DATE", "Llama 3.1/3.2's \"Today Date\" (\"26 Jul "
            "2024\"; default\nthe template's: 26 Jul 2024 for 3.1, today for 3.2),\n"
            "gpt-oss's \"Current date\" (\"2025-02-03\"; default\ntoday)"),
    OPT_STR("tokenizer-config", tokenizer_config, NULL, 0, "FILE", "tokenizer_config.json "
            "(default: the one beside\n--tokenizer-json)"),
};

static const cli_program program = {
    "nnt-tokenize", table, (int)(sizeof table / sizeof table[0]),
    "Usage: nnt-tokenize [OPTION]... (--out FILE | --print) INPUT...\n"
    "Encode text files, or directories (their regular files in name order, not recursive),\n"
    "into one llm.c token file that nnt-train --data reads, or print their ids.\n\n",
    "\nExit status: 0 done, 1 error (library, files), 2 bad usage.\nSee nnt-tokenize(1).\n",
    "INPUT", NULL};

#define usage(...) cli_error("nnt-tokenize", __VA_ARGS__)

/* A library call (what) failed: its message, which names the call already (said once). */
static int lib_error(const char *what, int rc)
{
    const char *msg = nnt_ctx_last_error(NULL);
    size_t n = strlen(what);
    if (strncmp(msg, what, n) == 0 && msg[n] == ':')
        fprintf(stderr, "nnt-tokenize: %s (%s)\n", msg, nnt_strerror(rc));
    else
        fprintf(stderr, "nnt-tokenize: %s: %s: %s\n", what, nnt_strerror(rc), msg);
    return 1;
}

static int sys_error(const char *path, const char *what)
{
    fprintf(stderr, "nnt-tokenize: %s: %s: %s\n", path, what, strerror(errno));
    return 1;
}

static int parse_opts(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof *o);
    o->inputs = argv + 1;   /* the operands, moved to the front of argv */
    int rc = cli_parse(&program, argc, argv, o, NULL, o->inputs, &o->ninputs);
    if (rc)
        return rc;
    if (!o->ninputs)
        return usage("%s", "no INPUT");
    if (!o->out == !o->print)
        return usage("%s", "give one of --out FILE and --print");
    if (o->tokenizer < 0)
        o->tokenizer = o->json ? TOK_JSON : o->vocab || o->merges ? TOK_BPE : TOK_BYTES;
    if (o->tokenizer == TOK_JSON && (!o->json || o->vocab || o->merges))
        return usage("%s", "--tokenizer json needs --tokenizer-json FILE (and no --bpe-*)");
    if (o->tokenizer == TOK_BPE && (!o->vocab || !o->merges || o->json))
        return usage("%s", "--tokenizer bpe needs --bpe-vocab and --bpe-merges (and no "
                     "--tokenizer-json)");
    if (o->tokenizer == TOK_BYTES && (o->json || o->vocab || o->merges))
        return usage("%s", "--tokenizer bytes takes no tokenizer file");
    if (o->pack && o->pad)
        return usage("%s", "give one of --pack and --pad");
    if (o->preference && o->pack)
        return usage("%s", "--preference lays each sequence of a pair in a row of its own: "
                     "not with --pack");
    if (o->unpaired && o->pack)
        return usage("%s", "--unpaired lays each record in a row of its own, its label the "
                     "row's value: not with --pack");
    if (o->unpaired && (o->preference || o->num_labels || o->label_names))
        return usage("%s", "give one of --unpaired, --preference and --num-labels");
    if (o->unpaired && o->loss >= 0)
        return usage("%s", "--unpaired: a record's completion counts, as KTO reads it (no "
                     "--loss)");
    if (o->label_names) {   /* their count: the labels */
        int64_t n = cli_names_count(o->label_names);
        if (o->num_labels && o->num_labels != n)
            return usage("--label-names gives %lld names for --num-labels %lld", (long long)n,
                         (long long)o->num_labels);
        if (n < 2)
            return usage("%s", "--label-names: a classifier has 2 labels or more");
        o->num_labels = n;
    }
    if (o->preference && o->num_labels)
        return usage("%s", "give one of --preference and --num-labels");
    if (o->problem && !o->num_labels)
        return usage("%s", "--problem-type is a classifier's: give --num-labels N");
    if (o->problem && o->label_names)
        return usage("%s", "--label-names: the records of --problem-type regression and "
                     "multi_label_classification give numbers, not label names");
    if (o->num_labels == 1 && o->problem != NNT_PROBLEM_REGRESSION)
        return usage("%s", "--num-labels 1: a regression of one value (--problem-type "
                     "regression); classification records need 2 labels or more");
    o->jsonl |= o->preference || o->unpaired || o->num_labels || o->pad_id >= 0;
    if (!o->jsonl && (o->seq || o->pack || o->pad || o->too_long > 0 || o->chat_template > 0 ||
                      o->tokenizer_config || o->chat_date || o->loss >= 0))
        return usage("%s", "--seq, --pack, --pad, --too-long, --chat-template, --chat-date, "
                     "--loss and --tokenizer-config are for --jsonl input");
    if (o->jsonl && (!o->out || !o->seq))
        return usage("%s", "--jsonl writes rows of T tokens to a file: give --seq T (nnt-train's "
                     "--seq) and --out FILE");
    return 0;
}

/* --jsonl: the records into rows of T with their loss mask (tokenize_jsonl.c). */
static int run_jsonl(const opts *o, const nnt_tokenizer *tok, int64_t vocab)
{
    const char **names = NULL;   /* --label-names */
    int64_t nnames = 0;
    if (o->label_names && cli_names(o->label_names, &names, &nnames)) {
        fprintf(stderr, "nnt-tokenize: --label-names: out of memory\n");
        return 1;
    }
    jsonl_opts j = {o->seq, o->pack, o->too_long == 1,
                    cli_chat_template(cli_chat_templates[o->chat_template]),
                    o->tokenizer_config, o->json, o->chat_date, NULL, o->loss == 1,
                    o->loss == 2, o->preference, o->num_labels, names, nnames, o->problem,
                    o->unpaired, o->pad_id};
    jsonl_stats st;
    int rc = tokenize_jsonl(tok, &j, o->inputs, o->ninputs, o->out,
                            o->bits < 0 ? 0 : o->bits == BITS_32 ? 32 : 16, vocab, &st);
    if (names)
        free((void *)names[0]);
    free(names);
    if (rc == 0 && isatty(2)) {
        fprintf(stderr, "nnt-tokenize: %lld %s (%lld cut) in %lld rows of %lld, %lld "
                "targets count in the loss", (long long)st.examples,
                o->preference ? "sequences of pairs" : "examples", (long long)st.cut,
                (long long)st.rows, (long long)o->seq, (long long)st.counted);
        if (o->unpaired)
            fprintf(stderr, "; %lld desirable, %lld undesirable%s", (long long)st.desirable,
                    (long long)(st.examples - st.desirable),
                    st.paired ? " (preference pairs read unpaired, as KTOTrainer does)" : "");
        for (int64_t k = 0; k < o->num_labels && k < 16; k++)   /* (the first 16) */
            fprintf(stderr, "%s%lld: %lld", k ? ", " : o->problem ? "; examples whose value "
                    "is above 0.5, of label " : "; examples of label ", (long long)k,
                    (long long)st.label_counts[k]);
        if (o->num_labels > 16)
            fprintf(stderr, ", ...");
        fputc('\n', stderr);
    }
    free(st.label_counts);
    return rc;
}

static int load_tokenizer(const opts *o, nnt_tokenizer **tok)
{
    int rc;
    if (o->tokenizer == TOK_JSON)
        return (rc = nnt_tokenizer_hf_load(o->json, tok)) ? lib_error("nnt_tokenizer_hf_load", rc)
                                                          : 0;
    if (o->tokenizer == TOK_BPE)
        return (rc = nnt_tokenizer_bpe_load(o->vocab, o->merges, tok))
                   ? lib_error("nnt_tokenizer_bpe_load", rc)
                   : 0;
    return (rc = nnt_tokenizer_bytes_create(tok)) ? lib_error("nnt_tokenizer_bytes_create", rc)
                                                  : 0;
}

/* ---- encoding one piece of text ----------------------------------------------------------- */

/* ids of text[0..len) into a fresh array (*ids, *n); a failure leaves the library's message. */
static int encode(const nnt_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                  size_t *n)
{
    size_t cap = len + 16;
    for (;;) {
        int32_t *buf = malloc(cap * sizeof *buf);
        if (!buf)
            return NNT_E_NOMEM;
        int rc = nnt_tokenizer_encode(tok, text, len, buf, cap, n);
        if (rc == NNT_E_INVAL && *n > cap) { /* more ids than bytes: room for them all */
            free(buf);
            cap = *n;
            continue;
        }
        if (rc) {
            free(buf);
            return rc;
        }
        *ids = buf;
        return 0;
    }
}

/* 1 when encoding a + b equals encoding a, then b, for texts cut after a newline before a
 * byte that is not white space: probed on a few texts. */
static int splits_at_lines(const nnt_tokenizer *tok)
{
    static const char *const texts[] = {
        "Hello world.\nNext line, again\n",     "a\n\nb c\n",
        "x.\n\n\nY z!\n",                       "  indented\nText 123\n",
        "1234\n5678\n",                         "caf\xc3\xa9\n\xc3\xbc" "ber\n",
        "end;\r\nthen\tsome\n",                 "<|endoftext|>\nafter\n",
    };
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
        const char *t = texts[k], *cut = NULL;
        size_t len = strlen(t);
        for (size_t i = 1; i < len && !cut; i++)
            if (t[i - 1] == '\n' && !strchr(" \t\r\n\v\f", t[i]))
                cut = t + i;
        int32_t *w = NULL, *a = NULL, *b = NULL;
        size_t nw, na, nb;
        int same = !encode(tok, t, len, &w, &nw) && !encode(tok, t, (size_t)(cut - t), &a, &na) &&
                   !encode(tok, cut, len - (size_t)(cut - t), &b, &nb) && nw == na + nb &&
                   !memcmp(w, a, na * sizeof *w) && !memcmp(w + na, b, nb * sizeof *w);
        free(w);
        free(a);
        free(b);
        if (!same)
            return 0;
    }
    return 1;
}

/* ---- inputs ------------------------------------------------------------------------------- */

typedef struct files {
    char **path;
    size_t n, cap;
} files;

static int add_file(files *f, const char *dir, const char *name)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 64;
        char **p = realloc(f->path, cap * sizeof *p);
        if (!p)
            return sys_error(name, "out of memory");
        f->path = p;
        f->cap = cap;
    }
    size_t size = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
    char *p = malloc(size);
    if (!p)
        return sys_error(name, "out of memory");
    if (dir)
        snprintf(p, size, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name);
    else
        snprintf(p, size, "%s", name);
    f->path[f->n++] = p;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dir's regular files (links followed; one name per file) in bytewise name order. */
static int add_dir(files *f, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return sys_error(dir, "cannot open directory");
    files names = {NULL, 0, 0};
    struct dirent *e;
    int rc = 0;
    errno = 0;
    while (!rc && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            rc = add_file(&names, NULL, e->d_name);
    if (!rc && errno)
        rc = sys_error(dir, "cannot read directory");
    closedir(d);
    if (names.n)
        qsort(names.path, names.n, sizeof *names.path, by_name);
    struct stat *seen = malloc((names.n + 1) * sizeof *seen);
    size_t nseen = 0, first = f->n;
    if (!seen && !rc)
        rc = sys_error(dir, "out of memory");
    for (size_t i = 0; !rc && i < names.n; i++) {
        rc = add_file(f, dir, names.path[i]);
        struct stat st;
        if (rc)
            break;
        int keep = stat(f->path[f->n - 1], &st) == 0 && S_ISREG(st.st_mode);
        for (size_t j = 0; keep && j < nseen; j++)
            keep = !(seen[j].st_dev == st.st_dev && seen[j].st_ino == st.st_ino);
        if (keep)
            seen[nseen++] = st;
        else
            free(f->path[--f->n]);
    }
    for (size_t i = 0; i < names.n; i++)
        free(names.path[i]);
    free(names.path);
    free(seen);
    if (!rc && f->n == first) {
        fprintf(stderr, "nnt-tokenize: directory %s has no regular files\n", dir);
        rc = 1;
    }
    return rc;
}

static int gather(const opts *o, files *f, uint64_t *total)
{
    *total = 0;
    for (int i = 0; i < o->ninputs; i++) {
        struct stat st;
        const char *p = o->inputs[i];
        if (stat(p, &st))
            return sys_error(p, "cannot open");
        int rc = S_ISDIR(st.st_mode) ? add_dir(f, p)
               : S_ISREG(st.st_mode) ? add_file(f, NULL, p)
                                     : (fprintf(stderr, "nnt-tokenize: %s: not a regular file or "
                                                "a directory\n", p), 1);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < f->n; i++) {
        struct stat st;
        if (stat(f->path[i], &st))
            return sys_error(f->path[i], "cannot open");
        *total += (uint64_t)st.st_size;
    }
    return 0;
}

/* The whole of path in a fresh buffer. */
static int read_all(const char *path, char **text, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return sys_error(path, "cannot open");
    struct stat st;
    if (fstat(fd, &st)) {
        close(fd);
        return sys_error(path, "cannot stat");
    }
    size_t size = (size_t)st.st_size, done = 0;
    char *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return sys_error(path, "out of memory for the text");
    }
    while (done < size) {
        ssize_t k = read(fd, buf + done, size - done);
        if (k <= 0) {
            if (k == 0)
                errno = EIO; /* shrank while read */
            free(buf);
            close(fd);
            return sys_error(path, "cannot read");
        }
        done += (size_t)k;
    }
    close(fd);
    *text = buf;
    *len = size;
    return 0;
}

/* ---- the output: ids on stdout, or a token file through nnt_token_writer ---------------- */

typedef struct output {
    const char *path;
    nnt_token_writer *w;
    int bits, print;
    int64_t vocab;                /* the tokenizer's: ids are checked against it            */
    uint64_t count;
} output;

static int out_begin(output *o)
{
    if (o->print)
        return 0;
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.bits = o->bits;
    wo.vocab = o->vocab;
    int rc = nnt_token_writer_open(NULL, o->path, &wo, &o->w);
    return rc ? lib_error("nnt_token_writer_open", rc) : 0;
}

static int out_ids(output *o, const int32_t *ids, size_t n)
{
    if (o->print) {
        for (size_t i = 0; i < n; i++)
            if (printf("%s%ld", o->count + i ? " " : "", (long)ids[i]) < 0)
                return sys_error("stdout", "cannot write");
        o->count += n;
        return 0;
    }
    int rc = nnt_token_writer_write(o->w, ids, n);
    if (rc)
        return lib_error("nnt_token_writer_write", rc);
    o->count += n;
    return 0;
}

static int out_commit(output *o)
{
    if (o->print)
        return fputs("\n", stdout) < 0 || fflush(stdout) ? sys_error("stdout", "cannot write")
                                                         : 0;
    int rc = nnt_token_writer_close(o->w);
    o->w = NULL;
    return rc ? lib_error("nnt_token_writer_close", rc) : 0;
}

static void out_abort(output *o)
{
    nnt_token_writer_destroy(o->w); /* the temporary file goes; an older output stays */
    o->w = NULL;
}

/* ---- chunks encoded on threads, written in order ------------------------------------------ */

typedef struct chunk {
    const char *text;
    size_t len;
    const char *path;             /* the file it is from, for messages                      */
    int32_t *ids;
    size_t n;
    int done, rc;
    char msg[512];
} chunk;

typedef struct pool {
    const nnt_tokenizer *tok;
    chunk *c;
    size_t nc, next;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} pool;

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next < p->nc ? p->next++ : p->nc;
        pthread_mutex_unlock(&p->mu);
        if (i == p->nc)
            return NULL;
        chunk *c = &p->c[i];
        int rc = encode(p->tok, c->text, c->len, &c->ids, &c->n);
        if (rc)
            snprintf(c->msg, sizeof c->msg, "%s", nnt_ctx_last_error(NULL));
        pthread_mutex_lock(&p->mu);
        c->rc = rc;
        c->done = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
}

typedef struct progress {
    int on;
    uint64_t done, total;
    struct timespec t0;
} progress;

static void show(progress *pr, uint64_t add, int last)
{
    pr->done += add;
    if (!pr->on)
        return;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double s = (double)(t.tv_sec - pr->t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - pr->t0.tv_nsec);
    fprintf(stderr, "\rnnt-tokenize: %.1f / %.1f MB (%3.0f%%), %.1f MB/s%s",
            (double)pr->done / 1e6, (double)pr->total / 1e6,
            pr->total ? 100.0 * (double)pr->done / (double)pr->total : 100.0,
            s > 0 ? (double)pr->done / 1e6 / s : 0.0, last ? "\n" : "");
}

/* Cut text into chunks of about `size` bytes at line starts (all of it when !split). */
static int cut(const char *text, size_t len, const char *path, size_t size, int split,
               chunk **c, size_t *nc, size_t *cap)
{
    size_t start = 0;
    while (start < len || (len == 0 && start == 0)) {
        size_t end = len;
        if (split && len - start > size) {
            end = start + size;
            while (end < len && !(text[end - 1] == '\n' && !strchr(" \t\r\n\v\f", text[end])))
                end++;
        }
        if (*nc == *cap) {
            *cap = *cap ? 2 * *cap : 256;
            chunk *g = realloc(*c, *cap * sizeof *g);
            if (!g)
                return sys_error(path, "out of memory");
            *c = g;
        }
        chunk *k = &(*c)[(*nc)++];
        memset(k, 0, sizeof *k);
        k->text = text + start;
        k->len = end - start;
        k->path = path;
        start = end;
        if (len == 0)
            break;
    }
    return 0;
}

/* Encode the chunks on o->threads threads; write each, in order, as soon as it is done. */
static int run_batch(const opts *o, const nnt_tokenizer *tok, chunk *c, size_t nc, output *out,
                     progress *pr)
{
    pool p = {tok, c, nc, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
    pthread_t th[256];
    int nt = 0, rc = 0;
    for (; nt < o->threads && (size_t)nt < nc; nt++)
        if (pthread_create(&th[nt], NULL, worker, &p)) {
            if (nt == 0) {
                worker(&p); /* no thread at all: encode here */
            }
            break;
        }
    for (size_t i = 0; i < nc; i++) {
        pthread_mutex_lock(&p.mu);
        while (!c[i].done)
            pthread_cond_wait(&p.cv, &p.mu);
        pthread_mutex_unlock(&p.mu);
        if (c[i].rc) {
            fprintf(stderr, "%snnt-tokenize: %s: nnt_tokenizer_encode: %s: %s\n",
                    pr->on ? "\n" : "", c[i].path, nnt_strerror(c[i].rc), c[i].msg);
            rc = 1;
        }
        if (!rc && (rc = out_ids(out, c[i].ids, c[i].n)) == 0)
            show(pr, c[i].len, 0);
        free(c[i].ids);
        c[i].ids = NULL;
        if (rc) { /* the threads stop after their chunk */
            pthread_mutex_lock(&p.mu);
            p.next = nc;
            pthread_mutex_unlock(&p.mu);
            break;
        }
    }
    for (int t = 0; t < nt; t++)
        pthread_join(th[t], NULL);
    for (size_t i = 0; i < nc; i++)
        free(c[i].ids); /* after an error: chunks encoded but not written */
    return rc;
}

static int tokenize(const opts *o, const nnt_tokenizer *tok, const files *f, output *out,
                    progress *pr)
{
    int split = splits_at_lines(tok), rc = 0;
    char **text = calloc(f->n + 1, sizeof *text);
    chunk *c = NULL;
    size_t nc = 0, cap = 0;
    if (!text)
        return sys_error("nnt-tokenize", "out of memory");
    for (size_t i = 0, first = 0; !rc && i < f->n; i++) {
        size_t len, batch = 0;
        if ((rc = read_all(f->path[i], &text[i], &len)) != 0)
            break;
        rc = cut(text[i], len, f->path[i], (size_t)o->chunk, split, &c, &nc, &cap);
        for (size_t k = 0; k < nc; k++)
            batch += c[k].len;
        if (!rc && (batch >= BATCH_BYTES || i + 1 == f->n)) {
            /* the threads take new chunks while the earlier ones are written */
            rc = run_batch(o, tok, c, nc, out, pr);
            for (size_t k = first; k <= i; k++) {
                free(text[k]);
                text[k] = NULL;
            }
            first = i + 1;
            nc = 0;
        }
    }
    for (size_t k = 0; k < f->n; k++)
        free(text[k]);
    free(text);
    free(c);
    return rc;
}

int main(int argc, char **argv)
{
    opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;   /* 1: --help or --version */
    nnt_tokenizer *tok = NULL;
    if ((rc = load_tokenizer(&o, &tok)) != 0)
        return rc;
    int64_t vocab = 0;
    if ((rc = nnt_tokenizer_vocab_size(tok, &vocab)) != 0) {
        nnt_tokenizer_destroy(tok);
        return lib_error("nnt_tokenizer_vocab_size", rc);
    }
    if (o.bits == BITS_16 && vocab > 65536) {
        nnt_tokenizer_destroy(tok);
        fprintf(stderr, "nnt-tokenize: --token-bits 16: the vocabulary has %lld ids, above "
                "65536\n", (long long)vocab);
        return 2;
    }
    if (o.jsonl) {
        rc = run_jsonl(&o, tok, vocab);
        nnt_tokenizer_destroy(tok);
        return rc;
    }
    files f = {NULL, 0, 0};
    uint64_t total = 0;
    int bits = o.bits == BITS_16 ? 16 : o.bits == BITS_32 || vocab > 65536 ? 32 : 16;
    output out = {o.out, NULL, bits, o.print, vocab, 0};
    progress pr = {isatty(2) && !o.print, 0, 0, {0, 0}};
    clock_gettime(CLOCK_MONOTONIC, &pr.t0);
    rc = gather(&o, &f, &total);
    pr.total = total;
    if (!rc)
        rc = out_begin(&out);
    if (!rc)
        rc = tokenize(&o, tok, &f, &out, &pr);
    if (!rc)
        rc = out_commit(&out);
    if (rc)
        out_abort(&out);
    else
        show(&pr, 0, 1);
    for (size_t i = 0; i < f.n; i++)
        free(f.path[i]);
    free(f.path);
    nnt_tokenizer_destroy(tok);
    return rc;
}
