/* SPDX-License-Identifier: MIT */
/* nnt_data: a token source for training, over the readers of lib/io.
 *   llm.c shards and nanoGPT .bin files stay on disk: every nnt_data_read preads its window
 *     (lib/io/tokens.c), so shards of any size work; ids >= vocab are found by that read.
 *     Several files (a pattern: "dir/fineweb_train_*.bin", as llm.c takes them) are one
 *     stream, the files in byte order of their names.
 *   Text (a file, a directory's regular files or the files of a pattern, in byte order of
 *     their names) is read and tokenized at open and held in memory as int32 ids (4 bytes per
 *     token); ids >= vocab are found at open.
 * No context is involved: failures are recorded as the calling thread's last error. The
 * source is immutable after open, so concurrent reads are safe. */
#define _FILE_OFFSET_BITS 64
#include "../internal.h"
#include "../io/io.h"
#include "hftok_impl.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct nnt_data {
    nnt_data_format format;       /* resolved: TEXT, LLMC or NANOGPT                       */
    int64_t count;                /* tokens (> 0)                                          */
    size_t nfiles;                /* LLMC, NANOGPT: the files, read on demand, in order    */
    nnt_tok_reader **file;        /* (nfiles)                                              */
    int64_t *file_end;            /* (nfiles) tokens of the files up to each one's end     */
    int32_t *tokens;              /* TEXT: (count) ids                                     */
    int masked;                   /* a file has a loss mask (nnt-tokenize's prompt/answer data) */
    int64_t counted;              /* tokens that count as targets                          */
    int64_t block;                /* the files' rows (0: none)                             */
    int starts;                   /* a file records its examples' starts (packed rows)     */
    int64_t row_values;           /* the values every row carries (all files alike; 0: none) */
};

/* ---- text: files and directories, tokenized at open ---------------------------------- */

typedef struct text_buf {
    int32_t *ids;
    size_t n, cap;
    int refuse_records;           /* AUTO: a file of JSON records is refused (json_records) */
} text_buf;

static int reserve(text_buf *b, size_t more, const char *path)
{
    if (b->ids && b->cap - b->n >= more)
        return NNT_OK;
    size_t cap = b->cap ? b->cap : 1 << 16;
    while (cap - b->n < more) {
        if (cap > SIZE_MAX / 2 / sizeof *b->ids)
            return nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: too many tokens", path);
        cap *= 2;
    }
    int32_t *ids = realloc(b->ids, cap * sizeof *ids);
    if (!ids)
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: out of host memory for %zu "
                        "tokens", path, cap);
    b->ids = ids;
    b->cap = cap;
    return NNT_OK;
}

/* The bytes of a regular file (malloc'd, freed by the caller). */
static int read_file(const char *path, char **out, size_t *len)
{
    char err[NNT_IO_ERRLEN];
    int fd;
    uint64_t size;
    int rc = nnt_io_open_read(path, &fd, &size, err, sizeof err);
    if (rc)
        return nnt_fail(NULL, rc, "nnt_data_open: %s", err);
    char *buf = size < SIZE_MAX ? malloc(size ? (size_t)size : 1) : NULL;
    if (!buf) {
        close(fd);
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: out of host memory for %llu "
                        "bytes", path, (unsigned long long)size);
    }
    rc = nnt_io_pread(fd, buf, (size_t)size, 0, path, err, sizeof err);
    close(fd);
    if (rc) {
        free(buf);
        return nnt_fail(NULL, rc, "nnt_data_open: %s", err);
    }
    *out = buf;
    *len = (size_t)size;
    return NNT_OK;
}

/* Whether text holds JSON records, one a line (prompt/answer data, or a dataset's
 * {"text": ...} export): its first line that is not blank (after a UTF-8 byte-order mark) is
 * a JSON object. Read as text, a model would learn the records' quotes and keys. */
static int json_records(const char *text, size_t len)
{
    size_t k = len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r' || text[k] == '\n'))
        k++;
    if (k == len || text[k] != '{')
        return 0;
    const char *nl = memchr(text + k, '\n', len - k);
    char err[NNT_IO_ERRLEN];
    nnt_json j;
    jv root;
    nnt_json_init(&j, text + k, nl ? (size_t)(nl - (text + k)) : len - k, 0, "the line", err,
                  sizeof err);
    if (hft_jv_parse(&j, &root, 0, "in the line") != 0)
        return 0;
    int records = nnt_json_end(&j) == 0 && root.type == JV_OBJ;
    hft_jv_free(&root);
    return records;
}

/* Append the ids of one text file; tok NULL: bytes. Byte-level and BPE tokenizers give at
 * most one id per byte, so len ids of room suffice at first; a tokenizer that gives more (a
 * Metaspace one prepends a word marker) says how many, and the text is encoded again into
 * that room. */
static int append_file(text_buf *b, const char *path, const nnt_tokenizer *tok)
{
    char *text;
    size_t len = 0, n = 0;
    int rc = read_file(path, &text, &len);
    if (rc == 0 && b->refuse_records && json_records(text, len))
        rc = nnt_fail(NULL, NNT_E_FORMAT, "nnt_data_open: %s holds JSON records, one a line: "
                      "read as text, the model would learn their quotes and keys. Records "
                      "{\"text\"}, {\"prompt\", \"completion\"} or {\"messages\"} become a "
                      "token file with a loss mask through nnt_sft (nnt-tokenize --jsonl; "
                      "nnt-train reads a .jsonl so); to train on the file's text as it is, give "
                      "the text format (NNT_DATA_TEXT, nnt-train --data-format text)", path);
    if (rc == 0)
        rc = reserve(b, len, path);
    if (rc == 0 && tok) {
        rc = nnt_tokenizer_encode(tok, text, len, b->ids + b->n, len, &n);
        if (rc == NNT_E_INVAL && n > len && (rc = reserve(b, n, path)) == 0)
            rc = nnt_tokenizer_encode(tok, text, len, b->ids + b->n, n, &n);
        if (rc)
            rc = nnt_fail(NULL, rc, "nnt_data_open: %s: %s", path, nnt_ctx_last_error(NULL));
    } else if (rc == 0) {
        nnt_text_encode(text, len, b->ids + b->n);
        n = len;
    }
    if (rc == 0)
        b->n += n;
    free(text);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The names of dir's entries, sorted bytewise (independent of the locale). */
static int list_dir(const char *dir, char ***out, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d)
        return nnt_fail(NULL, NNT_E_IO, "nnt_data_open: cannot open directory %s: %s", dir,
                        strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = NNT_OK;
    struct dirent *e;
    errno = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) {
                rc = nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: out of host memory", dir);
                break;
            }
            names = grown;
        }
        if ((names[n] = strdup(e->d_name)) == NULL)
            rc = nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: out of host memory", dir);
        else
            n++;
    }
    if (rc == 0 && errno != 0)
        rc = nnt_fail(NULL, NNT_E_IO, "nnt_data_open: cannot read directory %s: %s", dir,
                      strerror(errno));
    closedir(d);
    if (rc) {
        free_names(names, n);
        return rc;
    }
    if (n)
        qsort(names, n, sizeof *names, by_name);
    *out = names;
    *count = n;
    return NNT_OK;
}

/* 1 if (dev, ino) is among the first n of seen, else 0 and it is added at seen[n]. */
static int seen_before(struct stat *seen, size_t n, const struct stat *st)
{
    for (size_t i = 0; i < n; i++)
        if (seen[i].st_dev == st->st_dev && seen[i].st_ino == st->st_ino)
            return 1;
    seen[n] = *st;
    return 0;
}

/* A list of file paths (malloc'd strings). */
typedef struct path_list {
    char **path;
    size_t n;
} path_list;

static void path_list_free(path_list *l)
{
    free_names(l->path, l->n);
    l->path = NULL;
    l->n = 0;
}

/* Keep the entries of l that are regular files (symbolic links followed: a link to a
 * regular file counts as that file), each file once (one reached through two names, e.g.
 * GPL and GPL-3 in /usr/share/common-licenses, at its first name only), in their order;
 * subdirectories, dangling links and other kinds of file are dropped. l came from the
 * directory or pattern `kind name`; on failure it is freed. */
static int keep_regular_files(path_list *l, const char *kind, const char *name)
{
    struct stat *seen = malloc((l->n ? l->n : 1) * sizeof *seen);
    if (!seen) {
        path_list_free(l);
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: out of host memory", name);
    }
    size_t kept = 0;
    for (size_t i = 0; i < l->n; i++) {
        struct stat st;
        if (stat(l->path[i], &st) == 0 && S_ISREG(st.st_mode) && !seen_before(seen, kept, &st))
            l->path[kept++] = l->path[i];
        else
            free(l->path[i]);
    }
    free(seen);
    l->n = kept;
    if (kept)
        return NNT_OK;
    path_list_free(l);
    return nnt_fail(NULL, NNT_E_FORMAT, "nnt_data_open: %s %s has no regular files", kind,
                    name);
}

/* The regular files of directory dir, in byte order of their names. */
static int dir_files(const char *dir, path_list *l)
{
    char **names = NULL;
    size_t n = 0;
    int rc = list_dir(dir, &names, &n);
    if (rc)
        return rc;
    l->path = names;
    l->n = n;
    size_t dl = strlen(dir);
    for (size_t i = 0; i < n; i++) {
        size_t size = dl + strlen(names[i]) + 2;
        char *path = malloc(size);
        if (!path) {
            path_list_free(l);
            return nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: out of host memory", dir);
        }
        snprintf(path, size, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", names[i]);
        free(names[i]);
        names[i] = path;
    }
    return keep_regular_files(l, "directory", dir);
}

/* Whether path is a shell pattern (*, ? or [): several files, as llm.c names its shards. */
static int is_pattern(const char *path)
{
    return strpbrk(path, "*?[") != NULL;
}

/* The regular files matching pattern (glob(3)), in byte order of their names. */
static int pattern_files(const char *pattern, path_list *l)
{
    glob_t g;
    int rc = glob(pattern, GLOB_NOSORT, NULL, &g);
    if (rc == GLOB_NOMATCH)
        return nnt_fail(NULL, NNT_E_IO, "nnt_data_open: no file matches %s", pattern);
    if (rc)
        return nnt_fail(NULL, rc == GLOB_NOSPACE ? NNT_E_NOMEM : NNT_E_IO,
                        "nnt_data_open: cannot list the files of %s", pattern);
    l->path = calloc(g.gl_pathc ? g.gl_pathc : 1, sizeof *l->path);
    for (size_t i = 0; l->path && i < g.gl_pathc; i++)
        if ((l->path[l->n] = strdup(g.gl_pathv[i])) != NULL)
            l->n++;
    int complete = l->path && l->n == g.gl_pathc;
    globfree(&g);
    if (!complete) {
        path_list_free(l);
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: out of host memory", pattern);
    }
    qsort(l->path, l->n, sizeof *l->path, by_name);   /* bytewise, whatever the locale */
    return keep_regular_files(l, "pattern", pattern);
}

/* Append the ids of every file of l, in order. */
static int append_files(text_buf *b, const path_list *l, const nnt_tokenizer *tok)
{
    int rc = NNT_OK;
    for (size_t i = 0; rc == 0 && i < l->n; i++)
        rc = append_file(b, l->path[i], tok);
    return rc;
}

/* NNT_E_FORMAT naming the first id outside 0..vocab-1. */
static int check_vocab(const int32_t *ids, size_t n, int64_t vocab, const char *path)
{
    if (vocab <= 0)
        return NNT_OK;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= vocab)
            return nnt_fail(NULL, NNT_E_FORMAT, "nnt_data_open: %s (text): token %ld at "
                            "position %zu is not below the vocabulary size %lld", path,
                            (long)ids[i], i, (long long)vocab);
    return NNT_OK;
}

/* Text: the file path, or the files of l when l is not NULL (a directory or a pattern);
 * refuse_records: as the format AUTO (files of JSON records refused). */
static int open_text(const char *path, const path_list *l, const nnt_tokenizer *tok,
                     int64_t vocab, int refuse_records, nnt_data *d)
{
    text_buf b = {NULL, 0, 0, refuse_records};
    int rc = l ? append_files(&b, l, tok) : append_file(&b, path, tok);
    if (rc == 0)
        rc = check_vocab(b.ids, b.n, vocab, path);
    if (rc) {
        free(b.ids);
        return rc;
    }
    int32_t *fit = b.n ? realloc(b.ids, b.n * sizeof *fit) : NULL;
    d->format = NNT_DATA_TEXT;
    d->tokens = fit ? fit : b.ids;
    d->count = (int64_t)b.n;
    d->counted = d->count;
    return NNT_OK;
}

/* ---- token files: llm.c shards and nanoGPT .bin, read on demand ------------------------ */

/* The data format a token file resolved to (TEXT: not a token file). */
static nnt_data_format data_format_of(const nnt_tok_reader *r)
{
    nnt_tok_format f = nnt_tok_format_of(r);
    return f == NNT_TOK_LLMC || f == NNT_TOK_LLMC32 ? NNT_DATA_LLMC
         : f == NNT_TOK_NANOGPT                     ? NNT_DATA_NANOGPT
                                                    : NNT_DATA_TEXT;
}

/* Open path as a token file of format (AUTO: by its header or name); *r NULL on failure. */
static int open_token_file(const char *path, nnt_data_format format, int64_t vocab,
                           nnt_tok_reader **r)
{
    char err[NNT_IO_ERRLEN];
    nnt_tok_format f = format == NNT_DATA_LLMC ? NNT_TOK_LLMC
                     : format == NNT_DATA_NANOGPT ? NNT_TOK_NANOGPT : NNT_TOK_AUTO;
    /* 16-bit files hold ids below 65536 anyway; 32-bit shards are checked against any vocab */
    int32_t v = vocab > INT32_MAX ? 0 : (int32_t)vocab;
    *r = NULL;
    int rc = nnt_tok_open(path, f, v, r, err, sizeof err);
    return rc ? nnt_fail(NULL, rc, "nnt_data_open: %s", err) : NNT_OK;
}

/* "an llm.c shard" / "a nanoGPT file": what a token file of format f is. */
static const char *token_file_kind(nnt_data_format f)
{
    return f == NNT_DATA_LLMC ? "an llm.c shard" : "a nanoGPT file";
}

/* The tokens of r that count as targets (its loss mask's bits). */
static int count_targets(const nnt_tok_reader *r, const char *path, int64_t *counted)
{
    uint8_t buf[1 << 14];
    uint64_t n = nnt_tok_count(r);
    int64_t c = 0;
    for (uint64_t at = 0; at < n;) {
        size_t k = n - at < sizeof buf ? (size_t)(n - at) : sizeof buf;
        char err[NNT_IO_ERRLEN];
        int rc = nnt_tok_read_mask(r, at, k, buf, err, sizeof err);
        if (rc)
            return nnt_fail(NULL, rc, "nnt_data_open: %s: %s", path, err);
        for (size_t i = 0; i < k; i++)
            c += buf[i];
        at += k;
    }
    *counted = c;
    return NNT_OK;
}

/* Append an open token file to d's stream (d takes r); the files must be of one format. */
static int add_token_file(nnt_data *d, nnt_tok_reader *r, const char *path, const char *first)
{
    nnt_data_format f = data_format_of(r);
    if (d->nfiles && f != d->format) {
        nnt_tok_close(r);
        return nnt_fail(NULL, NNT_E_FORMAT, "nnt_data_open: %s is %s but %s is %s: give files "
                        "of one format", path, token_file_kind(f), first,
                        token_file_kind(d->format));
    }
    nnt_tok_reader **file = realloc(d->file, (d->nfiles + 1) * sizeof *file);
    int64_t *end = file ? realloc(d->file_end, (d->nfiles + 1) * sizeof *end) : NULL;
    if (file)
        d->file = file;
    if (end)
        d->file_end = end;
    if (!file || !end) {
        nnt_tok_close(r);
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: out of host memory", path);
    }
    int64_t block = (int64_t)nnt_tok_block(r);
    if (d->nfiles && block != d->block) {
        nnt_tok_close(r);
        return nnt_fail(NULL, NNT_E_FORMAT, "nnt_data_open: %s has rows of %lld tokens but %s "
                        "of %lld (nnt-tokenize --seq): give files written for one T", path,
                        (long long)block, first, (long long)d->block);
    }
    int64_t k = nnt_tok_row_values(r);
    if (d->nfiles && k != d->row_values) {
        nnt_tok_close(r);
        return nnt_fail(NULL, NNT_E_FORMAT, "nnt_data_open: %s has %lld values a row but %s "
                        "%lld: give files of one classifier's rows", path, (long long)k, first,
                        (long long)d->row_values);
    }
    d->row_values = k;
    int64_t counted = (int64_t)nnt_tok_count(r);
    if (nnt_tok_has_mask(r)) {
        int rc = count_targets(r, path, &counted);
        if (rc) {
            nnt_tok_close(r);
            return rc;
        }
        d->masked = 1;
    }
    if (nnt_tok_has_starts(r))
        d->starts = 1;
    d->block = block;
    d->counted += counted;
    d->format = f;
    d->count += (int64_t)nnt_tok_count(r);
    d->file[d->nfiles] = r;
    d->file_end[d->nfiles++] = d->count;
    return NNT_OK;
}

static void close_token_files(nnt_data *d)
{
    for (size_t i = 0; i < d->nfiles; i++)
        nnt_tok_close(d->file[i]);
    free(d->file);
    free(d->file_end);
    d->file = NULL;
    d->file_end = NULL;
    d->nfiles = 0;
    d->count = 0;
    d->counted = 0;
    d->masked = 0;
    d->starts = 0;
    d->block = 0;
    d->row_values = 0;
}

/* The files of l as one stream: token files of format, or with AUTO whatever they are (all
 * token files of one format, or all text: tokenized with tok, in order). */
static int open_files(const char *name, const path_list *l, nnt_data_format format,
                      const nnt_tokenizer *tok, int64_t vocab, nnt_data *d)
{
    if (format == NNT_DATA_TEXT)
        return open_text(name, l, tok, vocab, 0, d);
    int rc = NNT_OK, text = 0;
    for (size_t i = 0; rc == 0 && i < l->n; i++) {
        nnt_tok_reader *r;
        rc = open_token_file(l->path[i], format, vocab, &r);
        int is_text = rc == 0 && data_format_of(r) == NNT_DATA_TEXT;
        if (rc == 0 && i > 0 && is_text != text)
            rc = nnt_fail(NULL, NNT_E_FORMAT, "nnt_data_open: %s mixes text (%s) and token "
                          "files (%s): give files of one format", name,
                          l->path[is_text ? i : 0], l->path[is_text ? 0 : i]);
        text = is_text;
        if (rc == 0 && is_text)
            nnt_tok_close(r);
        else if (rc == 0)
            rc = add_token_file(d, r, l->path[i], l->path[0]);
        else
            nnt_tok_close(r);
    }
    if (rc == 0 && text)
        return open_text(name, l, tok, vocab, 1, d);
    return rc;
}

/* A directory read as text (AUTO) must not hold token files: they would be read as bytes.
 * Token files come as a pattern instead, which also keeps llm.c's val shards apart. */
static int refuse_token_files(const char *dir, const path_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        nnt_tok_reader *r;
        if (open_token_file(l->path[i], NNT_DATA_AUTO, 0, &r))
            continue;   /* not a token file either: the text reader reports it */
        nnt_data_format f = data_format_of(r);
        nnt_tok_close(r);
        if (f != NNT_DATA_TEXT)
            return nnt_fail(NULL, NNT_E_FORMAT, "nnt_data_open: directory %s holds %s (%s), "
                            "and a directory is read as text: name the token files with a "
                            "pattern, e.g. '%s%s*train*.bin' (llm.c's shards), or give the "
                            "text format", dir, f == NNT_DATA_LLMC ? "llm.c token shards"
                            : "nanoGPT token files", l->path[i], dir,
                            dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/");
    }
    return NNT_OK;
}

/* ---- the public functions -------------------------------------------------------------- */

void nnt_data_close(nnt_data *data)
{
    if (!data)
        return;
    close_token_files(data);
    free(data->tokens);
    free(data);
}

static int open_any(const char *path, nnt_data_format format, const nnt_tokenizer *tok,
                    int64_t vocab, nnt_data *d)
{
    struct stat st;
    path_list l = {NULL, 0};
    int rc;
    if (stat(path, &st) != 0) {
        if (errno != ENOENT || !is_pattern(path))
            return nnt_fail(NULL, NNT_E_IO, "nnt_data_open: %s: %s", path, strerror(errno));
        rc = pattern_files(path, &l);
        if (rc == 0)
            rc = open_files(path, &l, format, tok, vocab, d);
    } else if (S_ISDIR(st.st_mode)) {
        if (format != NNT_DATA_AUTO && format != NNT_DATA_TEXT)
            return nnt_fail(NULL, NNT_E_IO, "nnt_data_open: %s is a directory, read as text "
                            "only: name token files with a pattern, e.g. '%s/*.bin'", path,
                            path);
        rc = dir_files(path, &l);
        if (rc == 0 && format == NNT_DATA_AUTO)
            rc = refuse_token_files(path, &l);
        if (rc == 0)
            rc = open_text(path, &l, tok, vocab, format == NNT_DATA_AUTO, d);
    } else {
        char *one[1] = {(char *)path};
        rc = open_files(path, &(path_list){one, 1}, format, tok, vocab, d);
    }
    path_list_free(&l);
    return rc;
}

int nnt_data_open(const char *path, nnt_data_format format, const nnt_tokenizer *tok,
                  int64_t vocab, nnt_data **out)
{
    if (!out)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_data_open: out is NULL");
    *out = NULL;
    if (!path)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_data_open: path is NULL");
    if ((unsigned)format > NNT_DATA_NANOGPT)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_data_open: %s: unknown format %d", path,
                        (int)format);
    if (vocab < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_data_open: %s: vocab %lld < 0", path,
                        (long long)vocab);
    nnt_data *d = calloc(1, sizeof *d);
    if (!d)
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: out of host memory");
    int rc = open_any(path, format, tok, vocab, d);
    if (rc == 0 && d->count == 0)
        rc = nnt_fail(NULL, NNT_E_FORMAT, "nnt_data_open: %s holds no tokens", path);
    if (rc) {
        nnt_data_close(d);
        return rc;
    }
    char files[48] = "", mask[160] = "";
    if (d->nfiles > 1)
        snprintf(files, sizeof files, ", %zu files in name order", d->nfiles);
    if (d->masked)
        snprintf(mask, sizeof mask, "; %lld count in the loss%s", (long long)d->counted,
                 d->block ? "" : "");
    if (d->block)
        snprintf(mask + strlen(mask), sizeof mask - strlen(mask), "; rows of %lld%s",
                 (long long)d->block, d->starts ? ", examples packed (each its own positions "
                 "and attention)" : "");
    nnt_log(NNT_LOG_INFO, "data: %s: %lld tokens (%s%s%s)", path, (long long)d->count,
            d->format == NNT_DATA_TEXT ? "text" : d->format == NNT_DATA_LLMC ? "llm.c shard"
                                                                              : "nanoGPT",
            files, mask);
    *out = d;
    return NNT_OK;
}

int nnt_data_num_tokens(const nnt_data *data, int64_t *n)
{
    if (!data || !n)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_data_num_tokens: %s is NULL",
                        data ? "n" : "data");
    *n = data->count;
    return NNT_OK;
}

int nnt_data_format_of(const nnt_data *data, nnt_data_format *format)
{
    if (!data || !format)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_data_format_of: %s is NULL",
                        data ? "format" : "data");
    *format = data->format;
    return NNT_OK;
}

/* Tokens [start, start + n) of the source, inside it. */
static int read_span(const nnt_data *d, int64_t start, int64_t n, int32_t *ids)
{
    if (d->tokens) {
        memcpy(ids, d->tokens + start, (size_t)n * sizeof *ids);
        return NNT_OK;
    }
    size_t lo = 0, hi = d->nfiles - 1;   /* the first file ending after start */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->file_end[mid] > start)
            hi = mid;
        else
            lo = mid + 1;
    }
    for (size_t f = lo; n > 0; f++) {
        int64_t first = f ? d->file_end[f - 1] : 0;
        int64_t k = d->file_end[f] - start < n ? d->file_end[f] - start : n;
        char err[NNT_IO_ERRLEN];
        int rc = nnt_tok_read(d->file[f], (uint64_t)(start - first), (size_t)k, ids, err,
                              sizeof err);
        if (rc)
            return nnt_fail(NULL, rc, "nnt_data_read: %s", err);
        start += k, n -= k, ids += k;
    }
    return NNT_OK;
}

/* The mask of tokens [start, start + n) of the source, inside it: 1 counts, 0 not; with
 * starts, the example starts instead: 1 an example's first token. */
static int read_mask_span(const nnt_data *d, int64_t start, int64_t n, uint8_t *counts,
                          int starts)
{
    if (starts ? !d->starts : !d->masked) {
        memset(counts, starts ? 0 : 1, (size_t)n);
        return NNT_OK;
    }
    size_t lo = 0, hi = d->nfiles - 1;   /* the first file ending after start */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->file_end[mid] > start)
            hi = mid;
        else
            lo = mid + 1;
    }
    for (size_t f = lo; n > 0; f++) {
        int64_t first = f > 0 ? d->file_end[f - 1] : 0;
        int64_t k = d->file_end[f] - start < n ? d->file_end[f] - start : n;
        char err[NNT_IO_ERRLEN];
        int rc = (starts ? nnt_tok_read_starts : nnt_tok_read_mask)(
            d->file[f], (uint64_t)(start - first), (size_t)k, counts, err, sizeof err);
        if (rc)
            return nnt_fail(NULL, rc, "%s: %s", starts ? "nnt_data_read_starts" :
                            "nnt_data_read_mask", err);
        start += k, n -= k, counts += k;
    }
    return NNT_OK;
}

/* The rows of files 0 .. f (row-values sources: whole rows each) */
static int64_t d_row_end(const nnt_data *d, size_t f)
{
    return d->file_end[f] / d->block;
}

/* nnt_data_read_mask (starts 0) or nnt_data_read_starts (1) */
static int read_bits(const char *fn, nnt_data *data, int64_t pos, uint8_t *out, int64_t n,
                     int starts)
{
    if (!data || (!out && n > 0))
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn,
                        data ? (starts ? "starts" : "counts") : "data");
    if (n < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: n = %lld < 0", fn, (long long)n);
    int64_t at = pos % data->count;
    if (at < 0)
        at += data->count;
    for (int64_t done = 0; done < n;) {
        int64_t k = data->count - at < n - done ? data->count - at : n - done;
        NNT_TRY(read_mask_span(data, at, k, out + done, starts));
        done += k;
        at = 0;
    }
    return NNT_OK;
}

int nnt_data_read_mask(nnt_data *data, int64_t pos, uint8_t *counts, int64_t n)
{
    return read_bits("nnt_data_read_mask", data, pos, counts, n, 0);
}

int nnt_data_read_starts(nnt_data *data, int64_t pos, uint8_t *starts, int64_t n)
{
    return read_bits("nnt_data_read_starts", data, pos, starts, n, 1);
}

int nnt_data_info_get(const nnt_data *data, nnt_data_info *info)
{
    static const char fn[] = "nnt_data_info_get";
    if (!data || !info)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn, data ? "info" : "data");
    const size_t before_starts = offsetof(nnt_data_info, starts);
    NNT_TRY(nnt_check_struct_size(NULL, fn, "info", info->size, sizeof *info, before_starts,
                                  "initialise it with NNT_DATA_INFO_INIT"));
    info->format = data->format;
    info->tokens = data->count;
    info->masked = data->masked;
    info->counted = data->counted;
    info->block = data->block;
    if (info->size > before_starts)   /* appended in 0.3 */
        info->starts = data->starts;
    if (info->size > offsetof(nnt_data_info, row_values))   /* appended in 0.4 */
        info->row_values = data->row_values;
    return NNT_OK;
}

int nnt_data_read_row_values(nnt_data *data, int64_t row, float *values, int64_t n)
{
    static const char fn[] = "nnt_data_read_row_values";
    if (!data || (!values && n > 0))
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn, data ? "values" : "data");
    int64_t k = data->row_values, rows = data->block ? data->count / data->block : 0;
    if (!k)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: the source's rows carry no values", fn);
    if (n < 0 || n % k)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: n = %lld: whole rows of %lld values", fn,
                        (long long)n, (long long)k);
    int64_t at = row % rows;
    at += at < 0 ? rows : 0;
    for (int64_t done = 0; done < n / k; at = (at + 1) % rows, done++) {
        size_t f = 0;   /* the file holding the row's tokens */
        while (d_row_end(data, f) <= at)
            f++;
        int64_t first = f > 0 ? data->file_end[f - 1] / data->block : 0;
        char err[NNT_IO_ERRLEN];
        int rc = nnt_tok_read_values(data->file[f], (uint64_t)(at - first), 1,
                                     values + done * k, err, sizeof err);
        if (rc)
            return nnt_fail(NULL, rc, "%s: %s", fn, err);
    }
    return NNT_OK;
}

int nnt_data_read(nnt_data *data, int64_t pos, int32_t *ids, int64_t n)
{
    if (!data || (!ids && n > 0))
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_data_read: %s is NULL", data ? "ids" : "data");
    if (n < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_data_read: n = %lld < 0", (long long)n);
    int64_t at = pos % data->count;
    if (at < 0)
        at += data->count;
    for (int64_t done = 0; done < n;) {
        int64_t k = data->count - at < n - done ? data->count - at : n - done;
        int rc = read_span(data, at, k, ids + done);
        if (rc)
            return rc;
        done += k;
        at = 0;
    }
    return NNT_OK;
}
