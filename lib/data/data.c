/* nnt_data: a token source for training, over the readers of lib/io.
 *   llm.c shards and nanoGPT .bin files stay on disk: every nnt_data_read preads its window
 *     (lib/io/tokens.c), so shards of any size work; ids >= vocab are found by that read.
 *   Text (a file, or a directory's regular files in byte order of their names) is read and
 *     tokenized at open and held in memory as int32 ids (4 bytes per token); ids >= vocab
 *     are found at open.
 * No context is involved: failures are recorded as the calling thread's last error. The
 * source is immutable after open, so concurrent reads are safe. */
#define _FILE_OFFSET_BITS 64
#include "../internal.h"
#include "../io/io.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct nnt_data {
    nnt_data_format format;       /* resolved: TEXT, LLMC or NANOGPT                       */
    int64_t count;                /* tokens (> 0)                                          */
    nnt_tok_reader *reader;       /* LLMC, NANOGPT: the file, read on demand               */
    int32_t *tokens;              /* TEXT: (count) ids                                     */
};

/* ---- text: files and directories, tokenized at open ---------------------------------- */

typedef struct text_buf {
    int32_t *ids;
    size_t n, cap;
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

/* Append the ids of one text file; tok NULL: bytes. Byte-level and BPE tokenizers give at
 * most one id per byte, so len ids of room suffice at first; a tokenizer that gives more (a
 * Metaspace one prepends a word marker) says how many, and the text is encoded again into
 * that room. */
static int append_file(text_buf *b, const char *path, const nnt_tokenizer *tok)
{
    char *text;
    size_t len = 0, n = 0;
    int rc = read_file(path, &text, &len);
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

/* Every regular file of dir in name order, each once; symbolic links are followed (a link
 * to a regular file counts as that file; a file reached through two names, e.g. GPL and
 * GPL-3 in /usr/share/common-licenses, is read at its first name only); subdirectories,
 * dangling links and other kinds of file are skipped. */
static int append_dir(text_buf *b, const char *dir, const nnt_tokenizer *tok)
{
    char **names = NULL;
    size_t n = 0;
    int rc = list_dir(dir, &names, &n), files = 0;
    struct stat *seen = rc == 0 ? malloc((n ? n : 1) * sizeof *seen) : NULL;
    if (rc == 0 && !seen)
        rc = nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: out of host memory", dir);
    size_t dl = strlen(dir);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t size = dl + strlen(names[i]) + 2;
        char *path = malloc(size);
        if (!path) {
            rc = nnt_fail(NULL, NNT_E_NOMEM, "nnt_data_open: %s: out of host memory", dir);
            break;
        }
        snprintf(path, size, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", names[i]);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
            !seen_before(seen, (size_t)files, &st)) {
            rc = append_file(b, path, tok);
            files++;
        }
        free(path);
    }
    free(seen);
    free_names(names, n);
    if (rc == 0 && files == 0)
        rc = nnt_fail(NULL, NNT_E_FORMAT, "nnt_data_open: directory %s has no regular files",
                      dir);
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

static int open_text(const char *path, int is_dir, const nnt_tokenizer *tok, int64_t vocab,
                     nnt_data *d)
{
    text_buf b = {NULL, 0, 0};
    int rc = is_dir ? append_dir(&b, path, tok) : append_file(&b, path, tok);
    if (rc == 0)
        rc = check_vocab(b.ids, b.n, vocab, path);
    if (rc) {
        free(b.ids);
        return rc;
    }
    int32_t *fit = b.n ? realloc(b.ids, b.n * sizeof *fit) : NULL;
    d->tokens = fit ? fit : b.ids;
    d->count = (int64_t)b.n;
    return NNT_OK;
}

/* ---- token files: llm.c shards and nanoGPT .bin, read on demand ------------------------ */

static int open_tokens(const char *path, nnt_data_format format, int64_t vocab, nnt_data *d)
{
    char err[NNT_IO_ERRLEN];
    nnt_tok_format f = format == NNT_DATA_LLMC ? NNT_TOK_LLMC
                     : format == NNT_DATA_NANOGPT ? NNT_TOK_NANOGPT : NNT_TOK_AUTO;
    /* 16-bit files hold ids below 65536 anyway; 32-bit shards are checked against any vocab */
    int32_t v = vocab > INT32_MAX ? 0 : (int32_t)vocab;
    int rc = nnt_tok_open(path, f, v, &d->reader, err, sizeof err);
    if (rc)
        return nnt_fail(NULL, rc, "nnt_data_open: %s", err);
    f = nnt_tok_format_of(d->reader);
    d->format = f == NNT_TOK_LLMC || f == NNT_TOK_LLMC32 ? NNT_DATA_LLMC
              : f == NNT_TOK_NANOGPT ? NNT_DATA_NANOGPT : NNT_DATA_TEXT;
    d->count = (int64_t)nnt_tok_count(d->reader);
    return NNT_OK;
}

/* ---- the public functions -------------------------------------------------------------- */

void nnt_data_close(nnt_data *data)
{
    if (!data)
        return;
    nnt_tok_close(data->reader);
    free(data->tokens);
    free(data);
}

static int open_any(const char *path, nnt_data_format format, const nnt_tokenizer *tok,
                    int64_t vocab, nnt_data *d)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return nnt_fail(NULL, NNT_E_IO, "nnt_data_open: %s: %s", path, strerror(errno));
    int is_dir = S_ISDIR(st.st_mode);
    if (is_dir && format != NNT_DATA_AUTO && format != NNT_DATA_TEXT)
        return nnt_fail(NULL, NNT_E_IO, "nnt_data_open: %s is a directory (only text data "
                        "may be a directory)", path);
    if (is_dir || format == NNT_DATA_TEXT) {
        d->format = NNT_DATA_TEXT;
        return open_text(path, is_dir, tok, vocab, d);
    }
    int rc = open_tokens(path, format, vocab, d);
    if (rc == 0 && d->format == NNT_DATA_TEXT) {  /* AUTO found text: tokenize it */
        nnt_tok_close(d->reader);
        d->reader = NULL;
        rc = open_text(path, 0, tok, vocab, d);
    }
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
    nnt_log(NNT_LOG_INFO, "data: %s: %lld tokens (%s)", path, (long long)d->count,
            d->format == NNT_DATA_TEXT ? "text" : d->format == NNT_DATA_LLMC ? "llm.c shard"
                                                                              : "nanoGPT");
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
    char err[NNT_IO_ERRLEN];
    int rc = nnt_tok_read(d->reader, (uint64_t)start, (size_t)n, ids, err, sizeof err);
    if (rc)
        return nnt_fail(NULL, rc, "nnt_data_read: %s", err);
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
