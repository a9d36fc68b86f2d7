/* SPDX-License-Identifier: MIT */
/* safetensors tensor IO: reading one tensor's data with dtype conversions (nnt_st_read), and the
 * writer (tensors borrowed or streamed, the header written first, the file put in place through
 * nnt_io_out). The header parser: safetensors.c. */
#define _FILE_OFFSET_BITS 64
#include "safetensors_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    nnt_st_qname(e->name, qn, sizeof qn);
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
                           nnt_io_out_path(w->out), op);
    return 0;
}

int nnt_st_writer_meta(nnt_st_writer *w, const char *key, const char *value, char *err,
                       size_t errlen)
{
    int rc = writer_usable(w, "metadata", err, errlen);
    if (rc)
        return rc;
    const char *path = nnt_io_out_path(w->out);
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
    const char *path = nnt_io_out_path(w->out);
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
                         nnt_io_out_path(w->out));
    } else if (b.n > NNT_IO_MAXHEADER) {
        rc = nnt_io_errf(err, errlen, NNT_E_INVAL,
                         "%s: header of %zu bytes exceeds the limit of %u bytes",
                         nnt_io_out_path(w->out), b.n, NNT_IO_MAXHEADER);
    } else {
        unsigned char len[8];
        nnt_io_put_le64(len, b.n);
        rc = nnt_io_out_reserve(w->out, 8 + b.n + off, err, errlen);
        if (rc == 0)
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
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: data is NULL",
                           nnt_io_out_path(w->out));
    if (nbytes > w->stream_left)
        return nnt_io_errf(err, errlen, NNT_E_INVAL,
                           "%s: %zu bytes written but only %llu more are expected",
                           nnt_io_out_path(w->out), nbytes, (unsigned long long)w->stream_left);
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
                               nnt_io_out_path(w->out), e->name);
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
                         nnt_io_out_path(w->out), w->v[w->cur].name,
                         (unsigned long long)w->cur_done, (unsigned long long)w->v[w->cur].nbytes);
    if (rc) {
        nnt_st_writer_abort(w);
        return rc;
    }
    rc = nnt_io_out_commit(w->out, err, errlen); /* frees out, removes tmp on failure */
    writer_free(w);
    return rc;
}
