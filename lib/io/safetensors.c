/* SPDX-License-Identifier: MIT */
/* safetensors reader: the header parsed and checked (names, dtypes, shapes, data offsets that
 * tile the data section, __metadata__), open from a file or memory, lookups by name and index.
 * Reading a tensor's data and the writer: safetensors_tensor.c.
 *
 * Format: u64 little-endian N; N bytes of UTF-8 JSON: {"name": {"dtype": "F32", "shape": [..],
 * "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value", ...}} (possibly padded
 * with spaces); then the data section, offsets relative to its start, row-major, little-endian. */
#define _FILE_OFFSET_BITS 64
#include "safetensors_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ==== reader ================================================================================== */

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
const char *nnt_st_qname(const char *name, char *buf, size_t n)
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
        nnt_st_qname(key, qn, sizeof qn);
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
    nnt_st_qname(name, qn, sizeof qn);
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
                    nnt_st_qname(dt, qd, sizeof qd);
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
                nnt_st_qname(key, qk, sizeof qk);
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
            nnt_st_qname(name, qn, sizeof qn);
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
                                   nnt_st_qname(p->v[i].e.name, qn, sizeof qn), p->v[i].jpos);
    }
    if (r->nmeta > 1) {
        qsort(r->meta, r->nmeta, sizeof *r->meta, cmp_kv);
        for (size_t i = 1; i < r->nmeta; i++)
            if (strcmp(r->meta[i - 1].key, r->meta[i].key) == 0)
                return nnt_io_errf(j->err, j->errlen, NNT_E_FORMAT,
                                   "%s: duplicate __metadata__ key %s at byte %zu", j->what,
                                   nnt_st_qname(r->meta[i].key, qn, sizeof qn), r->meta[i].pos);
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
                               j->what, nnt_st_qname(e->e.name, qn, sizeof qn),
                               (unsigned long long)e->begin, (unsigned long long)e->end, e->jpos,
                               nnt_st_qname(p->v[i - 1].e.name, qo, sizeof qo),
                               (unsigned long long)p->v[i - 1].begin,
                               (unsigned long long)p->v[i - 1].end);
        }
        if (e->begin > expect)
            return nnt_io_errf(j->err, j->errlen, NNT_E_FORMAT,
                               "%s: data bytes [%llu, %llu) (file offset %llu) belong to no "
                               "tensor: the next one, %s (name at byte %zu), begins at %llu",
                               j->what, (unsigned long long)expect, (unsigned long long)e->begin,
                               (unsigned long long)(data_start + expect),
                               nnt_st_qname(e->e.name, qn, sizeof qn), e->jpos,
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
