/* safetensors reader and writer, and the file helpers shared by lib/io (errors, pread,
 * temp + fsync + rename output).
 *
 * Format: u64 little-endian N; N bytes of UTF-8 JSON: {"name": {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value", ...}} (possibly padded
 * with spaces); then the data section, offsets relative to its start, row-major, little-endian. */
#define _FILE_OFFSET_BITS 64
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

/* ==== shared helpers ========================================================================== */

int nnt_io_errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

int nnt_io_open_read(const char *path, int *fd, uint64_t *size, char *err, size_t errlen)
{
    *fd = -1;
    if (!path)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "io: path is NULL");
    int f;
    do /* O_NONBLOCK: a FIFO must not block the open; it is refused below */
        f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    while (f < 0 && errno == EINTR);
    if (f < 0)
        return nnt_io_errf(err, errlen, NNT_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return nnt_io_errf(err, errlen, NNT_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return nnt_io_errf(err, errlen, NNT_E_IO, "%s: not a regular file", path);
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0)
        fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    *size = (uint64_t)st.st_size;
    return 0;
}

int nnt_io_pread(int fd, void *buf, size_t n, uint64_t off, const char *path, char *err,
                 size_t errlen)
{
    unsigned char *p = buf;
    while (n > 0) {
        if (off > (uint64_t)INT64_MAX - n)
            return nnt_io_errf(err, errlen, NNT_E_IO, "%s: offset %llu out of range", path,
                               (unsigned long long)off);
        size_t chunk = n > (size_t)1 << 30 ? (size_t)1 << 30 : n;
        ssize_t got = pread(fd, p, chunk, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return nnt_io_errf(err, errlen, NNT_E_IO, "%s: read error at byte %llu: %s", path,
                               (unsigned long long)off, strerror(errno));
        if (got == 0)
            return nnt_io_errf(err, errlen, NNT_E_IO,
                               "%s: unexpected end of file at byte %llu (did it shrink?)", path,
                               (unsigned long long)off);
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return 0;
}

#define OUT_BUF (1u << 16)
struct nnt_io_out {
    int fd;
    int discard;                  /* a rank that does not write (nnt_io_set_writer)      */
    char *path, *tmp;
    uint64_t size;
    size_t used;
    unsigned char buf[OUT_BUF];
};

static int io_writer = 1;   /* process-wide: see nnt_io_set_writer */

void nnt_io_set_writer(int writes)
{
    __atomic_store_n(&io_writer, writes ? 1 : 0, __ATOMIC_SEQ_CST);
}

int nnt_io_writes(void)
{
    return __atomic_load_n(&io_writer, __ATOMIC_SEQ_CST);
}

static int write_all(nnt_io_out *o, const void *buf, size_t n, char *err, size_t errlen)
{
    const unsigned char *p = buf;
    if (o->discard)
        return 0;   /* a rank that does not write: the bytes are dropped */
    while (n > 0) {
        size_t chunk = n > (size_t)1 << 30 ? (size_t)1 << 30 : n;
        ssize_t put = write(o->fd, p, chunk);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0)
            return nnt_io_errf(err, errlen, NNT_E_IO, "%s: write error: %s", o->tmp,
                               put < 0 ? strerror(errno) : "nothing written");
        p += put;
        n -= (size_t)put;
    }
    return 0;
}

int nnt_io_out_begin(const char *path, nnt_io_out **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!path || !*path)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "io: empty output path");
    nnt_io_out *o = malloc(sizeof *o);
    size_t len = strlen(path);
    char *p = malloc(len + 1), *t = malloc(len + sizeof ".tmp-XXXXXX");
    if (!o || !p || !t) {
        free(o);
        free(p);
        free(t);
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory", path);
    }
    memcpy(p, path, len + 1);
    memcpy(t, path, len);
    memcpy(t + len, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
    if (!nnt_io_writes()) {   /* a sink with the same accounting */
        o->fd = -1, o->discard = 1, o->path = p, o->tmp = t, o->size = 0, o->used = 0;
        *out = o;
        return 0;
    }
    int fd = mkstemp(t);
    if (fd < 0) {
        int e = errno;
        free(o);
        free(p);
        free(t);
        return nnt_io_errf(err, errlen, NNT_E_IO, "%s: cannot create a temporary file: %s", path,
                           strerror(e));
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    /* mkstemp makes 0600: give the file the mode of the one it replaces, or 0644 */
    struct stat st;
    mode_t mode = 0644;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
        mode = st.st_mode & 07777;
    if (fchmod(fd, mode) != 0) {
        /* not fatal: the data is what matters */
    }
    o->fd = fd;
    o->discard = 0;
    o->path = p;
    o->tmp = t;
    o->size = 0;
    o->used = 0;
    *out = o;
    return 0;
}

int nnt_io_out_write(nnt_io_out *o, const void *buf, size_t n, char *err, size_t errlen)
{
    if (n == 0)
        return 0;
    if (o->used + n <= OUT_BUF) {
        memcpy(o->buf + o->used, buf, n);
        o->used += n;
        o->size += n;
        return 0;
    }
    int rc;
    if (o->used && (rc = write_all(o, o->buf, o->used, err, errlen)) != 0)
        return rc;
    o->used = 0;
    if (n < OUT_BUF) {
        memcpy(o->buf, buf, n);
        o->used = n;
    } else if ((rc = write_all(o, buf, n, err, errlen)) != 0) {
        return rc;
    }
    o->size += n;
    return 0;
}

int nnt_io_out_write_le(nnt_io_out *o, const void *buf, size_t n, size_t elsize, char *err,
                        size_t errlen)
{
    if (nnt_io_host_le() || elsize == 1)
        return nnt_io_out_write(o, buf, n * elsize, err, errlen);
    unsigned char tmp[4096];
    const unsigned char *p = buf;
    size_t per = sizeof tmp / elsize;
    while (n > 0) {
        size_t k = n < per ? n : per;
        memcpy(tmp, p, k * elsize);
        nnt_io_bswap(tmp, k, elsize);
        int rc = nnt_io_out_write(o, tmp, k * elsize, err, errlen);
        if (rc)
            return rc;
        p += k * elsize;
        n -= k;
    }
    return 0;
}

uint64_t nnt_io_out_size(const nnt_io_out *o) { return o->size; }

static void out_free(nnt_io_out *o)
{
    free(o->path);
    free(o->tmp);
    free(o);
}

void nnt_io_out_abort(nnt_io_out *o)
{
    if (!o)
        return;
    if (o->fd >= 0)
        close(o->fd);
    if (!o->discard)
        unlink(o->tmp);
    out_free(o);
}

int nnt_io_out_commit(nnt_io_out *o, char *err, size_t errlen)
{
    int rc = 0;
    if (o->discard) {
        out_free(o);
        return 0;
    }
    if (o->used)
        rc = write_all(o, o->buf, o->used, err, errlen);
    o->used = 0;
    if (rc == 0 && fsync(o->fd) != 0)
        rc = nnt_io_errf(err, errlen, NNT_E_IO, "%s: fsync: %s", o->tmp, strerror(errno));
    if (close(o->fd) != 0 && rc == 0)
        rc = nnt_io_errf(err, errlen, NNT_E_IO, "%s: close: %s", o->tmp, strerror(errno));
    o->fd = -1;
    if (rc == 0 && rename(o->tmp, o->path) != 0)
        rc = nnt_io_errf(err, errlen, NNT_E_IO, "%s: cannot rename %s over it: %s", o->path,
                         o->tmp, strerror(errno));
    if (rc != 0) {
        nnt_io_out_abort(o);
        return rc;
    }
    /* make the rename durable; a directory that cannot be fsynced (some file systems) is not
     * an error: the file itself is complete */
    char *slash = strrchr(o->path, '/');
    const char *dir = ".";
    if (slash) {
        slash[1] = 0;
        dir = o->path;
    }
    int dfd = open(dir, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) != 0) {
            /* ignored, see above */
        }
        close(dfd);
    }
    out_free(o);
    return 0;
}

/* ==== dtypes ================================================================================== */

static const struct {
    const char *name;
    size_t size;
} dtypes[NNT_IO_NDTYPES] = {
    [NNT_IO_BOOL] = {"BOOL", 1},       [NNT_IO_U8] = {"U8", 1},   [NNT_IO_I8] = {"I8", 1},
    [NNT_IO_F8_E5M2] = {"F8_E5M2", 1}, [NNT_IO_F8_E4M3] = {"F8_E4M3", 1},
    [NNT_IO_I16] = {"I16", 2},         [NNT_IO_U16] = {"U16", 2}, [NNT_IO_F16] = {"F16", 2},
    [NNT_IO_BF16] = {"BF16", 2},       [NNT_IO_I32] = {"I32", 4}, [NNT_IO_U32] = {"U32", 4},
    [NNT_IO_F32] = {"F32", 4},         [NNT_IO_F64] = {"F64", 8}, [NNT_IO_I64] = {"I64", 8},
    [NNT_IO_U64] = {"U64", 8},
};

const char *nnt_io_dtype_name(nnt_io_dtype t)
{
    return (unsigned)t < NNT_IO_NDTYPES ? dtypes[t].name : "?";
}

size_t nnt_io_dtype_size(nnt_io_dtype t)
{
    return (unsigned)t < NNT_IO_NDTYPES ? dtypes[t].size : 0;
}

int nnt_io_dtype_parse(const char *s, size_t len, nnt_io_dtype *out)
{
    for (int i = 0; i < NNT_IO_NDTYPES; i++)
        if (strlen(dtypes[i].name) == len && memcmp(dtypes[i].name, s, len) == 0) {
            *out = (nnt_io_dtype)i;
            return 0;
        }
    return -1;
}

/* ==== reader ================================================================================== */

typedef struct {
    char *key, *value;
    size_t pos;                    /* reader: file offset of the key, for messages           */
} kv;

struct nnt_st_reader {
    int fd;                        /* -1: memory                                            */
    const unsigned char *mem;
    uint64_t size;                 /* file size                                             */
    char *path;                    /* for messages                                          */
    size_t n;
    nnt_st_entry *entries;         /* by data offset                                        */
    const nnt_st_entry **by_name;  /* sorted by name                                        */
    size_t nmeta;
    kv *meta;                      /* sorted by key                                         */
};

typedef struct {
    nnt_st_entry e;
    uint64_t begin, end;           /* data_offsets                                          */
    size_t jpos;                   /* file offset of the name, for messages                 */
} pentry;

typedef struct {
    nnt_st_reader *r;
    nnt_json j;
    uint64_t data_size;
    pentry *v;
    size_t n, cap;
    size_t meta_cap;
    int have_meta;
} parser;

/* A name for messages: quoted, cut at 200 bytes, control characters shown as '?' so that a
 * hostile name cannot break the one-line message. */
static const char *qname(const char *name, char *buf, size_t n)
{
    size_t len = strlen(name), k = 0, cut = len > 200 ? 200 : len;
    if (n < 8)
        return "";
    buf[k++] = '\'';
    for (size_t i = 0; i < cut && k + 6 < n; i++) {
        unsigned char c = (unsigned char)name[i];
        buf[k++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (cut < len && k + 6 < n) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k++] = '\'';
    buf[k] = 0;
    return buf;
}

static int parse_meta(parser *p)
{
    nnt_json *j = &p->j;
    int rc = nnt_json_expect(j, '{', "to open __metadata__");
    if (rc)
        return rc;
    if (nnt_json_peek(j) == '}') {
        j->pos++;
        return 0;
    }
    for (;;) {
        char *key = NULL, *value = NULL;
        size_t kpos = j->base + j->pos;
        if ((rc = nnt_json_string(j, &key, NULL, NNT_IO_MAXNAME, 0, "(a __metadata__ key)")) != 0)
            return rc;
        if (!*key) {
            free(key);
            j->pos = kpos - j->base;
            return nnt_json_fail(j, "empty __metadata__ key");
        }
        char qn[256], ctx[400];
        qname(key, qn, sizeof qn);
        snprintf(ctx, sizeof ctx, "after __metadata__ key %s", qn);
        if ((rc = nnt_json_expect(j, ':', ctx)) != 0) {
            free(key);
            return rc;
        }
        snprintf(ctx, sizeof ctx, "(the value of __metadata__ key %s)", qn);
        if ((rc = nnt_json_string(j, &value, NULL, j->len, 0, ctx)) != 0) {
            free(key);
            return rc;
        }
        nnt_st_reader *r = p->r;
        if (r->nmeta == p->meta_cap) {
            size_t cap = p->meta_cap ? 2 * p->meta_cap : 8;
            kv *m = realloc(r->meta, cap * sizeof *m);
            if (!m) {
                free(key);
                free(value);
                return nnt_io_errf(j->err, j->errlen, NNT_E_NOMEM, "%s: out of memory", r->path);
            }
            r->meta = m;
            p->meta_cap = cap;
        }
        r->meta[r->nmeta].pos = kpos;
        r->meta[r->nmeta].key = key;
        r->meta[r->nmeta].value = value;
        r->nmeta++;
        int c = nnt_json_peek(j);
        if (c == ',') {
            j->pos++;
            continue;
        }
        if (c == '}') {
            j->pos++;
            return 0;
        }
        return nnt_json_fail(j, "expected ',' or '}' after __metadata__ key %s", qn);
    }
}

static int parse_entry(parser *p, char *name, size_t npos)
{
    nnt_json *j = &p->j;
    char qn[256], ctx[400];
    qname(name, qn, sizeof qn);
    snprintf(ctx, sizeof ctx, "to open tensor %s", qn);
    int rc = nnt_json_expect(j, '{', ctx);
    if (rc)
        return rc;
    pentry pe;
    memset(&pe, 0, sizeof pe);
    pe.jpos = npos;
    int have_dtype = 0, have_shape = 0, have_offsets = 0;
    size_t entry_pos = j->pos - 1;
    if (nnt_json_peek(j) == '}') {
        j->pos++;
    } else {
        for (;;) {
            char *key;
            size_t kpos = j->pos;
            snprintf(ctx, sizeof ctx, "(a key of tensor %s)", qn);
            if ((rc = nnt_json_string(j, &key, NULL, 64, 1, ctx)) != 0)
                return rc;
            snprintf(ctx, sizeof ctx, "after key '%s' of tensor %s", key, qn);
            if ((rc = nnt_json_expect(j, ':', ctx)) != 0) {
                free(key);
                return rc;
            }
            if (strcmp(key, "dtype") == 0) {
                free(key);
                if (have_dtype++) {
                    j->pos = kpos;
                    return nnt_json_fail(j, "duplicate key 'dtype' in tensor %s", qn);
                }
                char *dt;
                size_t dlen, dpos;
                nnt_json_peek(j);
                dpos = j->pos;
                snprintf(ctx, sizeof ctx, "(the dtype of tensor %s)", qn);
                if ((rc = nnt_json_string(j, &dt, &dlen, 64, 1, ctx)) != 0)
                    return rc;
                if (nnt_io_dtype_parse(dt, dlen, &pe.e.dtype) != 0) {
                    char qd[256];
                    qname(dt, qd, sizeof qd);
                    free(dt);
                    j->pos = dpos;
                    return nnt_json_fail(j, "unknown dtype %s in tensor %s", qd, qn);
                }
                free(dt);
            } else if (strcmp(key, "shape") == 0) {
                free(key);
                if (have_shape++) {
                    j->pos = kpos;
                    return nnt_json_fail(j, "duplicate key 'shape' in tensor %s", qn);
                }
                snprintf(ctx, sizeof ctx, "to open the shape of tensor %s", qn);
                if ((rc = nnt_json_expect(j, '[', ctx)) != 0)
                    return rc;
                if (nnt_json_peek(j) == ']') {
                    j->pos++;
                } else {
                    for (;;) {
                        uint64_t d;
                        snprintf(ctx, sizeof ctx, "in shape[%d] of tensor %s", pe.e.ndim, qn);
                        if ((rc = nnt_json_u64(j, &d, ctx)) != 0)
                            return rc;
                        if (pe.e.ndim == NNT_IO_MAXDIM)
                            return nnt_io_errf(j->err, j->errlen, NNT_E_UNSUPPORTED,
                                               "%s: tensor %s has more than %d dimensions at "
                                               "byte %zu",
                                               j->what, qn, NNT_IO_MAXDIM, j->base + j->pos);
                        if (d > (uint64_t)INT64_MAX)
                            return nnt_json_fail(j, "shape[%d] of tensor %s is too large",
                                                 pe.e.ndim, qn);
                        pe.e.shape[pe.e.ndim++] = (int64_t)d;
                        int c = nnt_json_peek(j);
                        if (c == ',') {
                            j->pos++;
                            continue;
                        }
                        snprintf(ctx, sizeof ctx, "to close the shape of tensor %s", qn);
                        if ((rc = nnt_json_expect(j, ']', ctx)) != 0)
                            return rc;
                        break;
                    }
                }
            } else if (strcmp(key, "data_offsets") == 0) {
                free(key);
                if (have_offsets++) {
                    j->pos = kpos;
                    return nnt_json_fail(j, "duplicate key 'data_offsets' in tensor %s", qn);
                }
                snprintf(ctx, sizeof ctx, "to open the data_offsets of tensor %s", qn);
                if ((rc = nnt_json_expect(j, '[', ctx)) != 0)
                    return rc;
                snprintf(ctx, sizeof ctx, "(data_offsets[0] of tensor %s)", qn);
                if ((rc = nnt_json_u64(j, &pe.begin, ctx)) != 0)
                    return rc;
                snprintf(ctx, sizeof ctx, "between the two data_offsets of tensor %s", qn);
                if ((rc = nnt_json_expect(j, ',', ctx)) != 0)
                    return rc;
                snprintf(ctx, sizeof ctx, "(data_offsets[1] of tensor %s)", qn);
                if ((rc = nnt_json_u64(j, &pe.end, ctx)) != 0)
                    return rc;
                snprintf(ctx, sizeof ctx, "to close the data_offsets of tensor %s (two numbers)",
                         qn);
                if ((rc = nnt_json_expect(j, ']', ctx)) != 0)
                    return rc;
            } else {
                char qk[256];
                qname(key, qk, sizeof qk);
                free(key);
                j->pos = kpos;
                return nnt_json_fail(j, "unknown key %s in tensor %s", qk, qn);
            }
            int c = nnt_json_peek(j);
            if (c == ',') {
                j->pos++;
                continue;
            }
            snprintf(ctx, sizeof ctx, "to close tensor %s", qn);
            if ((rc = nnt_json_expect(j, '}', ctx)) != 0)
                return rc;
            break;
        }
    }
    size_t end_pos = j->pos;
    j->pos = entry_pos;
    if (!have_dtype || !have_shape || !have_offsets)
        return nnt_json_fail(j, "tensor %s has no '%s'", qn,
                             !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");
    /* sizes: numel (non-zero dimensions must not overflow even when another one is 0) */
    uint64_t numel = 1, nz = 1;
    for (int d = 0; d < pe.e.ndim; d++) {
        uint64_t s = (uint64_t)pe.e.shape[d];
        if (s == 0) {
            numel = 0;
            continue;
        }
        if (nz > (uint64_t)INT64_MAX / s)
            return nnt_json_fail(j, "the shape of tensor %s has more than 2^63 elements", qn);
        nz *= s;
    }
    if (numel)
        numel = nz;
    size_t esz = nnt_io_dtype_size(pe.e.dtype);
    if (numel > UINT64_MAX / esz)
        return nnt_json_fail(j, "tensor %s is larger than 2^64 bytes", qn);
    pe.e.numel = numel;
    pe.e.nbytes = numel * esz;
    if (pe.begin > pe.end)
        return nnt_json_fail(j, "tensor %s: data_offsets [%llu, %llu] end before they begin", qn,
                             (unsigned long long)pe.begin, (unsigned long long)pe.end);
    if (pe.end > p->data_size)
        return nnt_json_fail(j,
                             "tensor %s: data_offsets [%llu, %llu] go past the end of the data "
                             "section (%llu bytes)",
                             qn, (unsigned long long)pe.begin, (unsigned long long)pe.end,
                             (unsigned long long)p->data_size);
    if (pe.end - pe.begin != pe.e.nbytes) {
        char sh[200];
        size_t used = 0;
        sh[0] = 0;
        for (int d = 0; d < pe.e.ndim && used < sizeof sh; d++)
            used += (size_t)snprintf(sh + used, sizeof sh - used, d ? ", %lld" : "%lld",
                                     (long long)pe.e.shape[d]);
        return nnt_json_fail(j,
                             "tensor %s: data_offsets [%llu, %llu] hold %llu bytes but shape [%s] "
                             "of %s needs %llu",
                             qn, (unsigned long long)pe.begin, (unsigned long long)pe.end,
                             (unsigned long long)(pe.end - pe.begin), sh,
                             nnt_io_dtype_name(pe.e.dtype), (unsigned long long)pe.e.nbytes);
    }
    j->pos = end_pos;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        pentry *v = realloc(p->v, cap * sizeof *v);
        if (!v)
            return nnt_io_errf(j->err, j->errlen, NNT_E_NOMEM, "%s: out of memory", j->what);
        p->v = v;
        p->cap = cap;
    }
    pe.e.name = name; /* owned from now on */
    p->v[p->n++] = pe;
    return 0;
}

static int cmp_pentry_name(const void *a, const void *b)
{
    const pentry *x = a, *y = b;
    int c = strcmp(x->e.name, y->e.name);
    return c ? c : (x->jpos > y->jpos) - (x->jpos < y->jpos);
}

static int cmp_pentry_begin(const void *a, const void *b)
{
    const pentry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) /* empty tensors first at one offset */
        return x->end < y->end ? -1 : 1;
    return (x->jpos > y->jpos) - (x->jpos < y->jpos);
}

static int cmp_entry_ptr_name(const void *a, const void *b)
{
    const nnt_st_entry *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static int cmp_kv(const void *a, const void *b)
{
    const kv *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

static int parse_header(parser *p, const char *hdr, size_t hlen)
{
    nnt_st_reader *r = p->r;
    nnt_json *j = &p->j;
    int rc;
    if (hlen == 0 || hdr[0] != '{')
        return nnt_json_fail(j, "the JSON header does not start with '{'");
    j->pos = 1;
    if (nnt_json_peek(j) == '}') {
        j->pos++;
    } else {
        for (;;) {
            char *name;
            nnt_json_peek(j);
            size_t npos = j->pos;
            if ((rc = nnt_json_string(j, &name, NULL, NNT_IO_MAXNAME, 0, "(a tensor name)")) != 0)
                return rc;
            char qn[256], ctx[400];
            qname(name, qn, sizeof qn);
            if (!*name) {
                free(name);
                j->pos = npos;
                return nnt_json_fail(j, "empty tensor name");
            }
            snprintf(ctx, sizeof ctx, "after name %s", qn);
            if ((rc = nnt_json_expect(j, ':', ctx)) != 0) {
                free(name);
                return rc;
            }
            if (strcmp(name, "__metadata__") == 0) {
                free(name);
                if (p->have_meta++) {
                    j->pos = npos;
                    return nnt_json_fail(j, "duplicate __metadata__");
                }
                if ((rc = parse_meta(p)) != 0)
                    return rc;
            } else if ((rc = parse_entry(p, name, j->base + npos)) != 0) {
                free(name);
                return rc;
            }
            int c = nnt_json_peek(j);
            if (c == ',') {
                j->pos++;
                continue;
            }
            snprintf(ctx, sizeof ctx, "(or ',') after tensor %s", qn);
            if ((rc = nnt_json_expect(j, '}', ctx)) != 0)
                return rc;
            break;
        }
    }
    if ((rc = nnt_json_end(j)) != 0)
        return rc;

    /* unique names, unique metadata keys */
    char qn[256];
    if (p->n > 1) {
        qsort(p->v, p->n, sizeof *p->v, cmp_pentry_name);
        for (size_t i = 1; i < p->n; i++)
            if (strcmp(p->v[i - 1].e.name, p->v[i].e.name) == 0)
                return nnt_io_errf(j->err, j->errlen, NNT_E_FORMAT,
                                   "%s: duplicate tensor name %s at byte %zu", j->what,
                                   qname(p->v[i].e.name, qn, sizeof qn), p->v[i].jpos);
    }
    if (r->nmeta > 1) {
        qsort(r->meta, r->nmeta, sizeof *r->meta, cmp_kv);
        for (size_t i = 1; i < r->nmeta; i++)
            if (strcmp(r->meta[i - 1].key, r->meta[i].key) == 0)
                return nnt_io_errf(j->err, j->errlen, NNT_E_FORMAT,
                                   "%s: duplicate __metadata__ key %s at byte %zu", j->what,
                                   qname(r->meta[i].key, qn, sizeof qn), r->meta[i].pos);
    }

    /* the tensors tile the data section: sorted by begin, each starts where the last ended */
    if (p->n > 1)
        qsort(p->v, p->n, sizeof *p->v, cmp_pentry_begin);
    uint64_t expect = 0, data_start = 8 + (uint64_t)hlen;
    for (size_t i = 0; i < p->n; i++) {
        pentry *e = &p->v[i];
        if (e->begin < expect) {
            char qo[256];
            return nnt_io_errf(j->err, j->errlen, NNT_E_FORMAT,
                               "%s: tensor %s (data_offsets [%llu, %llu], name at byte %zu) "
                               "overlaps tensor %s (data_offsets [%llu, %llu])",
                               j->what, qname(e->e.name, qn, sizeof qn),
                               (unsigned long long)e->begin, (unsigned long long)e->end, e->jpos,
                               qname(p->v[i - 1].e.name, qo, sizeof qo),
                               (unsigned long long)p->v[i - 1].begin,
                               (unsigned long long)p->v[i - 1].end);
        }
        if (e->begin > expect)
            return nnt_io_errf(j->err, j->errlen, NNT_E_FORMAT,
                               "%s: data bytes [%llu, %llu) (file offset %llu) belong to no "
                               "tensor: the next one, %s (name at byte %zu), begins at %llu",
                               j->what, (unsigned long long)expect, (unsigned long long)e->begin,
                               (unsigned long long)(data_start + expect),
                               qname(e->e.name, qn, sizeof qn), e->jpos,
                               (unsigned long long)e->begin);
        expect = e->end;
        e->e.offset = data_start + e->begin;
    }
    if (expect != p->data_size)
        return nnt_io_errf(j->err, j->errlen, NNT_E_FORMAT,
                           "%s: data bytes [%llu, %llu) (file offset %llu to the end) belong to "
                           "no tensor",
                           j->what, (unsigned long long)expect, (unsigned long long)p->data_size,
                           (unsigned long long)(data_start + expect));

    r->entries = malloc((p->n ? p->n : 1) * sizeof *r->entries);
    r->by_name = malloc((p->n ? p->n : 1) * sizeof *r->by_name);
    if (!r->entries || !r->by_name)
        return nnt_io_errf(j->err, j->errlen, NNT_E_NOMEM, "%s: out of memory", j->what);
    for (size_t i = 0; i < p->n; i++) {
        r->entries[i] = p->v[i].e;
        r->by_name[i] = &r->entries[i];
    }
    r->n = p->n;
    p->n = 0; /* names now owned by r */
    if (r->n > 1)
        qsort(r->by_name, r->n, sizeof *r->by_name, cmp_entry_ptr_name);
    return 0;
}

void nnt_st_close(nnt_st_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    for (size_t i = 0; i < r->n; i++)
        free((char *)r->entries[i].name);
    for (size_t i = 0; i < r->nmeta; i++) {
        free(r->meta[i].key);
        free(r->meta[i].value);
    }
    free(r->meta);
    free(r->entries);
    free(r->by_name);
    free(r->path);
    free(r);
}

/* Common part of the two opens: r has fd or mem, size and path set. */
static int st_open(nnt_st_reader *r, char *err, size_t errlen)
{
    unsigned char lenbuf[8];
    int rc;
    if (r->size < 8)
        return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                           "%s: %llu bytes: too short for the 8-byte header length", r->path,
                           (unsigned long long)r->size);
    if (r->fd >= 0) {
        if ((rc = nnt_io_pread(r->fd, lenbuf, 8, 0, r->path, err, errlen)) != 0)
            return rc;
    } else {
        memcpy(lenbuf, r->mem, 8);
    }
    uint64_t hlen = nnt_io_le64(lenbuf);
    if (hlen > NNT_IO_MAXHEADER)
        return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                           "%s: header length %llu (bytes 0-7) exceeds the limit of %u bytes",
                           r->path, (unsigned long long)hlen, NNT_IO_MAXHEADER);
    if (hlen > r->size - 8)
        return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                           "%s: header length %llu (bytes 0-7) goes past the end of the file "
                           "(%llu bytes)",
                           r->path, (unsigned long long)hlen, (unsigned long long)r->size);
    const char *hdr;
    char *owned = NULL;
    if (r->fd >= 0) {
        owned = malloc(hlen ? (size_t)hlen : 1);
        if (!owned)
            return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory for a %llu-byte header",
                               r->path, (unsigned long long)hlen);
        if ((rc = nnt_io_pread(r->fd, owned, (size_t)hlen, 8, r->path, err, errlen)) != 0) {
            free(owned);
            return rc;
        }
        hdr = owned;
    } else {
        hdr = (const char *)r->mem + 8;
    }
    parser p;
    memset(&p, 0, sizeof p);
    p.r = r;
    p.data_size = r->size - 8 - hlen;
    nnt_json_init(&p.j, hdr, (size_t)hlen, 8, r->path, err, errlen);
    rc = parse_header(&p, hdr, (size_t)hlen);
    for (size_t i = 0; i < p.n; i++)
        free((char *)p.v[i].e.name);
    free(p.v);
    free(owned);
    return rc;
}

static nnt_st_reader *st_new(const char *path)
{
    nnt_st_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->fd = -1;
    size_t len = strlen(path);
    r->path = malloc(len + 1);
    if (!r->path) {
        free(r);
        return NULL;
    }
    memcpy(r->path, path, len + 1);
    return r;
}

int nnt_st_open(const char *path, nnt_st_reader **out, char *err, size_t errlen)
{
    if (!out)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "safetensors: out is NULL");
    *out = NULL;
    if (!path)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "safetensors: path is NULL");
    nnt_st_reader *r = st_new(path);
    if (!r)
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory", path);
    int rc = nnt_io_open_read(path, &r->fd, &r->size, err, errlen);
    if (rc == 0)
        rc = st_open(r, err, errlen);
    if (rc) {
        nnt_st_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

int nnt_st_open_mem(const void *buf, size_t len, nnt_st_reader **out, char *err, size_t errlen)
{
    if (!out)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "safetensors: out is NULL");
    *out = NULL;
    if (!buf && len)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "safetensors: buffer is NULL");
    nnt_st_reader *r = st_new("<memory>");
    if (!r)
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "<memory>: out of memory");
    r->mem = buf;
    r->size = len;
    int rc = st_open(r, err, errlen);
    if (rc) {
        nnt_st_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

size_t nnt_st_count(const nnt_st_reader *r) { return r ? r->n : 0; }

const nnt_st_entry *nnt_st_entry_at(const nnt_st_reader *r, size_t i)
{
    return r && i < r->n ? &r->entries[i] : NULL;
}

const nnt_st_entry *nnt_st_find(const nnt_st_reader *r, const char *name)
{
    if (!r || !name)
        return NULL;
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, r->by_name[mid]->name);
        if (c == 0)
            return r->by_name[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

size_t nnt_st_metadata_count(const nnt_st_reader *r) { return r ? r->nmeta : 0; }

int nnt_st_metadata_at(const nnt_st_reader *r, size_t i, const char **key, const char **value)
{
    if (!r || i >= r->nmeta)
        return NNT_E_INVAL;
    if (key)
        *key = r->meta[i].key;
    if (value)
        *value = r->meta[i].value;
    return 0;
}

const char *nnt_st_metadata_get(const nnt_st_reader *r, const char *key)
{
    if (!r || !key)
        return NULL;
    size_t lo = 0, hi = r->nmeta;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(key, r->meta[mid].key);
        if (c == 0)
            return r->meta[mid].value;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

static int src_read(const nnt_st_reader *r, void *dst, size_t n, uint64_t off, char *err,
                    size_t errlen)
{
    if (r->fd >= 0)
        return nnt_io_pread(r->fd, dst, n, off, r->path, err, errlen);
    memcpy(dst, r->mem + off, n); /* within size: checked at open */
    return 0;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, f;
    float v;
    if (exp == 0) {
        v = (float)mant * (1.0f / 16777216.0f); /* mant * 2^-24: exact */
        return sign ? -v : v;
    }
    if (exp == 31)
        f = sign | 0x7f800000u | mant << 13;
    else
        f = sign | (exp + 112) << 23 | mant << 13;
    memcpy(&v, &f, sizeof v);
    return v;
}

static int is_int_type(nnt_io_dtype t)
{
    return t == NNT_IO_I8 || t == NNT_IO_U8 || t == NNT_IO_I16 || t == NNT_IO_U16 ||
           t == NNT_IO_I32 || t == NNT_IO_U32 || t == NNT_IO_I64;
}

static int64_t load_int(nnt_io_dtype t, const unsigned char *p)
{
    switch (t) {
    case NNT_IO_I8: return (int8_t)p[0];
    case NNT_IO_U8: return p[0];
    case NNT_IO_I16: return (int16_t)nnt_io_le16(p);
    case NNT_IO_U16: return nnt_io_le16(p);
    case NNT_IO_I32: return (int32_t)nnt_io_le32(p);
    case NNT_IO_U32: return nnt_io_le32(p);
    default: return (int64_t)nnt_io_le64(p);
    }
}

int nnt_st_read(const nnt_st_reader *r, const nnt_st_entry *e, nnt_io_dtype want,
                uint64_t first, uint64_t count, void *dst, char *err, size_t errlen)
{
    if (!r || !e || (!dst && count))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "safetensors: NULL reader, entry or buffer");
    if (r->n == 0 || e < r->entries || e >= r->entries + r->n)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: entry does not belong to this reader",
                           r->path);
    char qn[256];
    qname(e->name, qn, sizeof qn);
    if ((unsigned)want >= NNT_IO_NDTYPES)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: tensor %s: bad dtype %d requested",
                           r->path, qn, (int)want);
    if (first > e->numel || count > e->numel - first)
        return nnt_io_errf(err, errlen, NNT_E_INVAL,
                           "%s: tensor %s: elements [%llu, %llu + %llu) outside its %llu elements",
                           r->path, qn, (unsigned long long)first, (unsigned long long)first,
                           (unsigned long long)count, (unsigned long long)e->numel);
    size_t ssz = nnt_io_dtype_size(e->dtype), dsz = nnt_io_dtype_size(want);
    uint64_t off = e->offset + first * ssz;
    if (count == 0)
        return 0;
    if (count > SIZE_MAX / (ssz > dsz ? ssz : dsz))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: tensor %s: too many elements", r->path,
                           qn);
    if (want == e->dtype) {
        int rc = src_read(r, dst, (size_t)count * ssz, off, err, errlen);
        if (rc == 0 && !nnt_io_host_le() && ssz > 1)
            nnt_io_bswap(dst, (size_t)count, ssz);
        return rc;
    }
    enum { F16_F32, BF16_F32, F64_F32, INT_I32, INT_I64 } kind;
    if (want == NNT_IO_F32 && e->dtype == NNT_IO_F16)
        kind = F16_F32;
    else if (want == NNT_IO_F32 && e->dtype == NNT_IO_BF16)
        kind = BF16_F32;
    else if (want == NNT_IO_F32 && e->dtype == NNT_IO_F64)
        kind = F64_F32;
    else if (want == NNT_IO_I32 && is_int_type(e->dtype))
        kind = INT_I32;
    else if (want == NNT_IO_I64 && is_int_type(e->dtype))
        kind = INT_I64;
    else
        return nnt_io_errf(err, errlen, NNT_E_UNSUPPORTED,
                           "%s: tensor %s: cannot convert %s to %s", r->path, qn,
                           nnt_io_dtype_name(e->dtype), nnt_io_dtype_name(want));
    unsigned char buf[1 << 15];
    size_t per = sizeof buf / ssz;
    unsigned char *o = dst;
    uint64_t done = 0;
    while (done < count) {
        size_t k = count - done < per ? (size_t)(count - done) : per;
        int rc = src_read(r, buf, k * ssz, off + done * ssz, err, errlen);
        if (rc)
            return rc;
        for (size_t i = 0; i < k; i++) {
            const unsigned char *s = buf + i * ssz;
            float f;
            int64_t v;
            int32_t v32;
            switch (kind) {
            case F16_F32:
                f = half_to_float(nnt_io_le16(s));
                memcpy(o, &f, 4);
                break;
            case BF16_F32: {
                uint32_t bits = (uint32_t)nnt_io_le16(s) << 16;
                memcpy(o, &bits, 4);
                break;
            }
            case F64_F32: {
                uint64_t bits = nnt_io_le64(s);
                double d;
                memcpy(&d, &bits, 8);
                f = (float)d;
                memcpy(o, &f, 4);
                break;
            }
            case INT_I32:
                v = load_int(e->dtype, s);
                if (v < INT32_MIN || v > INT32_MAX)
                    return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                                       "%s: tensor %s element %llu: value %lld does not fit in I32",
                                       r->path, qn, (unsigned long long)(first + done + i),
                                       (long long)v);
                v32 = (int32_t)v;
                memcpy(o, &v32, 4);
                break;
            case INT_I64:
                v = load_int(e->dtype, s);
                memcpy(o, &v, 8);
                break;
            }
            o += dsz;
        }
        done += k;
    }
    return 0;
}

/* ==== writer ================================================================================== */

typedef struct {
    char *name;
    nnt_io_dtype dtype;
    int ndim;
    int64_t shape[NNT_IO_MAXDIM];
    uint64_t nbytes;
    const void *data;              /* borrowed, or NULL: streamed                            */
} wentry;

struct nnt_st_writer {
    nnt_io_out *out;
    wentry *v;
    size_t n, cap;
    kv *meta;
    size_t nmeta, meta_cap;
    uint64_t total;                /* data bytes declared                                   */
    uint64_t stream_left;          /* bytes still expected from nnt_st_writer_write          */
    int header_done;
    size_t cur;                    /* tensor being written                                  */
    uint64_t cur_done;             /* its bytes written so far                              */
    int failed;                    /* an I/O error happened: only finish/abort remain        */
};

static char *dupstr(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d)
        memcpy(d, s, n + 1);
    return d;
}

int nnt_st_writer_begin(const char *path, nnt_st_writer **out, char *err, size_t errlen)
{
    if (!out)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "safetensors: out is NULL");
    *out = NULL;
    nnt_st_writer *w = calloc(1, sizeof *w);
    if (!w)
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "safetensors: out of memory");
    int rc = nnt_io_out_begin(path, &w->out, err, errlen);
    if (rc) {
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

static int check_name(const char *what, const char *name, const char *path, char *err,
                      size_t errlen)
{
    if (!name)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: %s is NULL", path, what);
    size_t len = strlen(name), bad;
    if (len == 0 || len > NNT_IO_MAXNAME)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: %s of %zu bytes (1..%d allowed)", path,
                           what, len, NNT_IO_MAXNAME);
    if (!nnt_utf8_valid(name, len, &bad))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: %s is not UTF-8 (byte %zu)", path,
                           what, bad);
    return 0;
}

static int writer_usable(nnt_st_writer *w, const char *op, char *err, size_t errlen)
{
    if (!w)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "safetensors: writer is NULL");
    if (w->failed)
        return nnt_io_errf(err, errlen, w->failed, "%s: %s after an earlier failure",
                           w->out->path, op);
    return 0;
}

int nnt_st_writer_meta(nnt_st_writer *w, const char *key, const char *value, char *err,
                       size_t errlen)
{
    int rc = writer_usable(w, "metadata", err, errlen);
    if (rc)
        return rc;
    const char *path = w->out->path;
    if (w->header_done)
        return nnt_io_errf(err, errlen, NNT_E_STATE,
                           "%s: metadata after the data was started", path);
    if ((rc = check_name("metadata key", key, path, err, errlen)) != 0)
        return rc;
    size_t bad;
    if (!value || !nnt_utf8_valid(value, strlen(value), &bad))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: metadata value of '%s' is %s", path,
                           key, value ? "not UTF-8" : "NULL");
    for (size_t i = 0; i < w->nmeta; i++)
        if (strcmp(w->meta[i].key, key) == 0)
            return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: duplicate metadata key '%s'", path,
                               key);
    if (w->nmeta == w->meta_cap) {
        size_t cap = w->meta_cap ? 2 * w->meta_cap : 8;
        kv *m = realloc(w->meta, cap * sizeof *m);
        if (!m)
            return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory", path);
        w->meta = m;
        w->meta_cap = cap;
    }
    char *k = dupstr(key), *v = dupstr(value);
    if (!k || !v) {
        free(k);
        free(v);
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory", path);
    }
    w->meta[w->nmeta].key = k;
    w->meta[w->nmeta].value = v;
    w->nmeta++;
    return 0;
}

int nnt_st_writer_add(nnt_st_writer *w, const char *name, nnt_io_dtype dtype, int ndim,
                      const int64_t *shape, const void *data, char *err, size_t errlen)
{
    int rc = writer_usable(w, "add", err, errlen);
    if (rc)
        return rc;
    const char *path = w->out->path;
    if (w->header_done)
        return nnt_io_errf(err, errlen, NNT_E_STATE,
                           "%s: tensor added after the data was started", path);
    if ((rc = check_name("tensor name", name, path, err, errlen)) != 0)
        return rc;
    if (strcmp(name, "__metadata__") == 0)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: '__metadata__' is not a tensor name",
                           path);
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->v[i].name, name) == 0)
            return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: duplicate tensor name '%s'", path,
                               name);
    if ((unsigned)dtype >= NNT_IO_NDTYPES)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: tensor '%s': bad dtype %d", path, name,
                           (int)dtype);
    if (ndim < 0 || ndim > NNT_IO_MAXDIM || (ndim > 0 && !shape))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: tensor '%s': bad ndim %d (0..%d)", path,
                           name, ndim, NNT_IO_MAXDIM);
    uint64_t numel = 1, nz = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: tensor '%s': shape[%d] = %lld < 0",
                               path, name, d, (long long)shape[d]);
        if (shape[d] == 0) {
            numel = 0;
            continue;
        }
        if (nz > (uint64_t)INT64_MAX / (uint64_t)shape[d])
            return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: tensor '%s': shape too large",
                               path, name);
        nz *= (uint64_t)shape[d];
    }
    if (numel)
        numel = nz;
    size_t esz = nnt_io_dtype_size(dtype);
    if (numel > (uint64_t)INT64_MAX / esz || w->total > (uint64_t)INT64_MAX - numel * esz)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: tensor '%s': too large", path, name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        wentry *v = realloc(w->v, cap * sizeof *v);
        if (!v)
            return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory", path);
        w->v = v;
        w->cap = cap;
    }
    wentry *e = &w->v[w->n];
    memset(e, 0, sizeof *e);
    if (!(e->name = dupstr(name)))
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory", path);
    e->dtype = dtype;
    e->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        e->shape[d] = shape[d];
    e->nbytes = numel * esz;
    e->data = data;
    w->total += e->nbytes;
    if (!data)
        w->stream_left += e->nbytes;
    w->n++;
    return 0;
}

/* Growable text buffer for the header. */
typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_json_string(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char tmp[8];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            sb_put(b, tmp, 2);
        } else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            sb_put(b, tmp, 6);
        } else {
            sb_put(b, (const char *)&c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static int write_header(nnt_st_writer *w, char *err, size_t errlen)
{
    sbuf b = {0};
    char num[64];
    sb_str(&b, "{");
    if (w->nmeta) {
        sb_str(&b, "\"__metadata__\":{");
        for (size_t i = 0; i < w->nmeta; i++) {
            if (i)
                sb_str(&b, ",");
            sb_json_string(&b, w->meta[i].key);
            sb_str(&b, ":");
            sb_json_string(&b, w->meta[i].value);
        }
        sb_str(&b, "}");
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        const wentry *e = &w->v[i];
        if (i || w->nmeta)
            sb_str(&b, ",");
        sb_json_string(&b, e->name);
        sb_str(&b, ":{\"dtype\":\"");
        sb_str(&b, nnt_io_dtype_name(e->dtype));
        sb_str(&b, "\",\"shape\":[");
        for (int d = 0; d < e->ndim; d++) {
            snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)e->shape[d]);
            sb_str(&b, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + e->nbytes));
        sb_str(&b, num);
        off += e->nbytes;
    }
    sb_str(&b, "}");
    while ((8 + b.n) % 8) /* align the data section to 8 bytes, as the reference writer does */
        sb_str(&b, " ");
    int rc;
    if (b.oom) {
        rc = nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory for the header",
                         w->out->path);
    } else if (b.n > NNT_IO_MAXHEADER) {
        rc = nnt_io_errf(err, errlen, NNT_E_INVAL,
                         "%s: header of %zu bytes exceeds the limit of %u bytes", w->out->path,
                         b.n, NNT_IO_MAXHEADER);
    } else {
        unsigned char len[8];
        nnt_io_put_le64(len, b.n);
        rc = nnt_io_out_write(w->out, len, 8, err, errlen);
        if (rc == 0)
            rc = nnt_io_out_write(w->out, b.p, b.n, err, errlen);
        if (rc)
            w->failed = rc;
    }
    free(b.p);
    if (rc == 0)
        w->header_done = 1;
    return rc;
}

/* Write the borrowed tensors at the cursor until one that is streamed (or the end). */
static int advance(nnt_st_writer *w, char *err, size_t errlen)
{
    while (w->cur < w->n && (w->v[w->cur].data || w->v[w->cur].nbytes == 0)) {
        const wentry *e = &w->v[w->cur];
        if (e->nbytes) {
            size_t es = nnt_io_dtype_size(e->dtype);
            int rc = nnt_io_out_write_le(w->out, e->data, (size_t)(e->nbytes / es), es, err,
                                         errlen);
            if (rc)
                return w->failed = rc;
        }
        w->cur++;
        w->cur_done = 0;
    }
    return 0;
}

static int start_data(nnt_st_writer *w, char *err, size_t errlen)
{
    int rc = 0;
    if (!w->header_done && (rc = write_header(w, err, errlen)) == 0)
        rc = advance(w, err, errlen);
    return rc;
}

int nnt_st_writer_write(nnt_st_writer *w, const void *data, size_t nbytes, char *err,
                        size_t errlen)
{
    int rc = writer_usable(w, "write", err, errlen);
    if (rc)
        return rc;
    if (!data && nbytes)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: data is NULL", w->out->path);
    if (nbytes > w->stream_left)
        return nnt_io_errf(err, errlen, NNT_E_INVAL,
                           "%s: %zu bytes written but only %llu more are expected", w->out->path,
                           nbytes, (unsigned long long)w->stream_left);
    if ((rc = start_data(w, err, errlen)) != 0)
        return rc;
    const unsigned char *p = data;
    while (nbytes > 0) {
        const wentry *e = &w->v[w->cur]; /* a streamed tensor with bytes left: stream_left > 0 */
        uint64_t left = e->nbytes - w->cur_done;
        size_t k = nbytes < left ? nbytes : (size_t)left, es = nnt_io_dtype_size(e->dtype);
        if (!nnt_io_host_le() && es > 1 && (k % es || w->cur_done % es))
            return nnt_io_errf(err, errlen, NNT_E_INVAL,
                               "%s: tensor '%s': on a big-endian host, chunks must hold whole "
                               "elements",
                               w->out->path, e->name);
        rc = nnt_io_host_le() ? nnt_io_out_write(w->out, p, k, err, errlen)
                              : nnt_io_out_write_le(w->out, p, k / es, es, err, errlen);
        if (rc)
            return w->failed = rc;
        p += k;
        nbytes -= k;
        w->stream_left -= k;
        w->cur_done += k;
        if (w->cur_done == e->nbytes) {
            w->cur++;
            w->cur_done = 0;
            if ((rc = advance(w, err, errlen)) != 0)
                return rc;
        }
    }
    return 0;
}

static void writer_free(nnt_st_writer *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->v[i].name);
    for (size_t i = 0; i < w->nmeta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->v);
    free(w->meta);
    free(w);
}

void nnt_st_writer_abort(nnt_st_writer *w)
{
    if (!w)
        return;
    nnt_io_out_abort(w->out);
    writer_free(w);
}

int nnt_st_writer_finish(nnt_st_writer *w, char *err, size_t errlen)
{
    int rc = writer_usable(w, "finish", err, errlen);
    if (rc) {
        nnt_st_writer_abort(w);
        return rc;
    }
    if ((rc = start_data(w, err, errlen)) == 0 && (rc = advance(w, err, errlen)) == 0 &&
        w->cur < w->n)
        rc = nnt_io_errf(err, errlen, NNT_E_INVAL,
                         "%s: tensor '%s' got %llu of its %llu bytes (nothing written)",
                         w->out->path, w->v[w->cur].name, (unsigned long long)w->cur_done,
                         (unsigned long long)w->v[w->cur].nbytes);
    if (rc) {
        nnt_st_writer_abort(w);
        return rc;
    }
    rc = nnt_io_out_commit(w->out, err, errlen); /* frees out, removes tmp on failure */
    writer_free(w);
    return rc;
}
