/* SPDX-License-Identifier: MIT */
/* llm.c GPT-2 checkpoints (karpathy/llm.c, train_gpt2.c): a header of 256 little-endian int32
 * (magic 20240326, version 3 = fp32, maxT, V, L, NH, C, Vp, zeros), then the 16 parameter
 * tensors as float32 in a fixed order, nothing else. Version 5 (bf16 parameters) is
 * recognised and refused. */
#define _FILE_OFFSET_BITS 64
#include "io.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const names[NNT_LLMC_NPARAMS] = {
    "wte",  "wpe",  "ln1w", "ln1b",    "qkvw",    "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw",  "fcb",     "fcprojw", "fcprojb", "lnfw",  "lnfb",
};

static int mul(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b && a > UINT64_MAX / b)
        return -1;
    *out = a * b;
    return 0;
}

/* code: the status for a bad configuration (INVAL from a caller, FORMAT from a file). */
static int layout(const nnt_llmc_config *c, nnt_llmc_param *p, uint64_t *total, int code,
                  const char *what, char *err, size_t errlen)
{
    if (!c)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: configuration is NULL", what);
    const struct {
        const char *name;
        int32_t v;
    } f[6] = {{"max_seq_len (header[2])", c->max_seq_len},
              {"vocab_size (header[3])", c->vocab_size},
              {"num_layers (header[4])", c->num_layers},
              {"num_heads (header[5])", c->num_heads},
              {"channels (header[6])", c->channels},
              {"padded_vocab_size (header[7])", c->padded_vocab_size}};
    for (int i = 0; i < 6; i++)
        if (f[i].v <= 0)
            return nnt_io_errf(err, errlen, code, "%s: %s = %ld must be positive", what,
                               f[i].name, (long)f[i].v);
    if (c->padded_vocab_size < c->vocab_size)
        return nnt_io_errf(err, errlen, code,
                           "%s: padded_vocab_size (header[7]) = %ld is smaller than vocab_size "
                           "(header[3]) = %ld",
                           what, (long)c->padded_vocab_size, (long)c->vocab_size);
    if (c->channels % c->num_heads != 0)
        return nnt_io_errf(err, errlen, code,
                           "%s: channels (header[6]) = %ld is not a multiple of num_heads "
                           "(header[5]) = %ld",
                           what, (long)c->channels, (long)c->num_heads);
    uint64_t T = (uint64_t)c->max_seq_len, Vp = (uint64_t)c->padded_vocab_size,
             L = (uint64_t)c->num_layers, C = (uint64_t)c->channels;
    /* (ndim, dims) per parameter; dims use L, C, multiples of C, Vp, T */
    const uint64_t sh[NNT_LLMC_NPARAMS][4] = {
        {2, Vp, C, 0},     {2, T, C, 0},  {2, L, C, 0},     {2, L, C, 0},
        {3, L, 3 * C, C},  {2, L, 3 * C}, {3, L, C, C},     {2, L, C, 0},
        {2, L, C, 0},      {2, L, C, 0},  {3, L, 4 * C, C}, {2, L, 4 * C, 0},
        {3, L, C, 4 * C},  {2, L, C, 0},  {1, C, 0, 0},     {1, C, 0, 0},
    };
    uint64_t sum = 0, off = NNT_LLMC_HEADER_BYTES;
    for (int i = 0; i < NNT_LLMC_NPARAMS; i++) {
        uint64_t n = 1, bytes;
        int nd = (int)sh[i][0];
        for (int d = 0; d < nd; d++)
            if (mul(n, sh[i][1 + d], &n) != 0)
                goto overflow;
        if (n > (uint64_t)INT64_MAX || sum > UINT64_MAX - n)
            goto overflow;
        if (p) {
            p[i].name = names[i];
            p[i].ndim = nd;
            for (int d = 0; d < 3; d++)
                p[i].shape[d] = d < nd ? (int64_t)sh[i][1 + d] : 0;
            p[i].numel = n;
            p[i].offset = off;
        }
        sum += n;
        if (mul(n, 4, &bytes) != 0 || off > (uint64_t)INT64_MAX - bytes)
            goto overflow;
        off += bytes;
    }
    if (total)
        *total = sum;
    return 0;
overflow:
    return nnt_io_errf(err, errlen, code,
                       "%s: the configuration (maxT %ld, V %ld, L %ld, NH %ld, C %ld, Vp %ld) "
                       "needs more than 2^63 bytes",
                       what, (long)c->max_seq_len, (long)c->vocab_size, (long)c->num_layers,
                       (long)c->num_heads, (long)c->channels, (long)c->padded_vocab_size);
}

int nnt_llmc_layout(const nnt_llmc_config *cfg, nnt_llmc_param params[NNT_LLMC_NPARAMS],
                    uint64_t *total_params, char *err, size_t errlen)
{
    return layout(cfg, params, total_params, NNT_E_INVAL, "llm.c checkpoint", err, errlen);
}

struct nnt_llmc_reader {
    int fd;
    char *path;
    nnt_llmc_config cfg;
    nnt_llmc_param p[NNT_LLMC_NPARAMS];
};

void nnt_llmc_close(nnt_llmc_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    free(r->path);
    free(r);
}

int nnt_llmc_open(const char *path, nnt_llmc_reader **out, char *err, size_t errlen)
{
    if (!out || !path)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "llm.c checkpoint: NULL argument");
    *out = NULL;
    nnt_llmc_reader *r = calloc(1, sizeof *r);
    size_t len = strlen(path);
    if (r)
        r->path = malloc(len + 1);
    if (!r || !r->path) {
        free(r);
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory", path);
    }
    memcpy(r->path, path, len + 1);
    uint64_t size, total;
    unsigned char h[NNT_LLMC_HEADER_BYTES];
    int rc = nnt_io_open_read(path, &r->fd, &size, err, errlen);
    if (rc)
        goto fail;
    if (size < NNT_LLMC_HEADER_BYTES) {
        rc = nnt_io_errf(err, errlen, NNT_E_FORMAT,
                         "%s: %llu bytes: too short for the %d-byte llm.c header", path,
                         (unsigned long long)size, NNT_LLMC_HEADER_BYTES);
        goto fail;
    }
    if ((rc = nnt_io_pread(r->fd, h, sizeof h, 0, path, err, errlen)) != 0)
        goto fail;
    int32_t magic = (int32_t)nnt_io_le32(h), version = (int32_t)nnt_io_le32(h + 4);
    if (magic != NNT_LLMC_MAGIC) {
        rc = nnt_io_errf(err, errlen, NNT_E_FORMAT,
                         "%s: bad magic %ld in header[0] (expected %d: not an llm.c GPT-2 "
                         "checkpoint)",
                         path, (long)magic, NNT_LLMC_MAGIC);
        goto fail;
    }
    if (version == NNT_LLMC_VERSION_BF16) {
        rc = nnt_io_errf(err, errlen, NNT_E_UNSUPPORTED,
                         "%s: version 5 (bf16 parameters) in header[1]: bf16 checkpoints are "
                         "not supported, only version 3 (fp32)",
                         path);
        goto fail;
    }
    if (version != NNT_LLMC_VERSION_FP32) {
        rc = nnt_io_errf(err, errlen, NNT_E_FORMAT,
                         "%s: unknown version %ld in header[1] (expected 3, fp32)", path,
                         (long)version);
        goto fail;
    }
    r->cfg.max_seq_len = (int32_t)nnt_io_le32(h + 8);
    r->cfg.vocab_size = (int32_t)nnt_io_le32(h + 12);
    r->cfg.num_layers = (int32_t)nnt_io_le32(h + 16);
    r->cfg.num_heads = (int32_t)nnt_io_le32(h + 20);
    r->cfg.channels = (int32_t)nnt_io_le32(h + 24);
    r->cfg.padded_vocab_size = (int32_t)nnt_io_le32(h + 28);
    if ((rc = layout(&r->cfg, r->p, &total, NNT_E_FORMAT, path, err, errlen)) != 0)
        goto fail;
    uint64_t want = NNT_LLMC_HEADER_BYTES + 4 * total; /* no overflow: checked by layout */
    if (size != want) {
        rc = nnt_io_errf(err, errlen, NNT_E_FORMAT,
                         "%s: %llu bytes, but the header (maxT %ld, V %ld, L %ld, NH %ld, C %ld, "
                         "Vp %ld) needs 1024 + 4 * %llu = %llu bytes (%s)",
                         path, (unsigned long long)size, (long)r->cfg.max_seq_len,
                         (long)r->cfg.vocab_size, (long)r->cfg.num_layers,
                         (long)r->cfg.num_heads, (long)r->cfg.channels,
                         (long)r->cfg.padded_vocab_size, (unsigned long long)total,
                         (unsigned long long)want,
                         size < want ? "truncated" : "extra bytes at the end");
        goto fail;
    }
    *out = r;
    return 0;
fail:
    nnt_llmc_close(r);
    return rc;
}

const nnt_llmc_config *nnt_llmc_config_of(const nnt_llmc_reader *r) { return r ? &r->cfg : NULL; }

const nnt_llmc_param *nnt_llmc_param_at(const nnt_llmc_reader *r, int i)
{
    return r && i >= 0 && i < NNT_LLMC_NPARAMS ? &r->p[i] : NULL;
}

const nnt_llmc_param *nnt_llmc_find(const nnt_llmc_reader *r, const char *name)
{
    if (!r || !name)
        return NULL;
    for (int i = 0; i < NNT_LLMC_NPARAMS; i++)
        if (strcmp(names[i], name) == 0)
            return &r->p[i];
    return NULL;
}

int nnt_llmc_read(const nnt_llmc_reader *r, int i, uint64_t first, uint64_t count, float *dst,
                  char *err, size_t errlen)
{
    if (!r || i < 0 || i >= NNT_LLMC_NPARAMS || (!dst && count))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "llm.c checkpoint: bad argument");
    const nnt_llmc_param *p = &r->p[i];
    if (first > p->numel || count > p->numel - first)
        return nnt_io_errf(err, errlen, NNT_E_INVAL,
                           "%s: %s: elements [%llu, %llu + %llu) outside its %llu elements",
                           r->path, p->name, (unsigned long long)first,
                           (unsigned long long)first, (unsigned long long)count,
                           (unsigned long long)p->numel);
    if (count > SIZE_MAX / 4)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: %s: too many elements", r->path,
                           p->name);
    int rc = nnt_io_pread(r->fd, dst, (size_t)count * 4, p->offset + 4 * first, r->path, err,
                          errlen);
    if (rc == 0 && !nnt_io_host_le())
        nnt_io_bswap(dst, (size_t)count, 4);
    return rc;
}

struct nnt_llmc_writer {
    nnt_io_out *out;
    uint64_t left;                 /* floats still expected                                 */
    int failed;                    /* a write failed: only finish/abort remain               */
};

int nnt_llmc_writer_begin(const char *path, const nnt_llmc_config *cfg, nnt_llmc_writer **out,
                          char *err, size_t errlen)
{
    if (!out)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "llm.c checkpoint: out is NULL");
    *out = NULL;
    uint64_t total;
    int rc = nnt_llmc_layout(cfg, NULL, &total, err, errlen);
    if (rc)
        return rc;
    nnt_llmc_writer *w = malloc(sizeof *w);
    if (!w)
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "llm.c checkpoint: out of memory");
    if ((rc = nnt_io_out_begin(path, &w->out, err, errlen)) != 0) {
        free(w);
        return rc;
    }
    unsigned char h[NNT_LLMC_HEADER_BYTES];
    memset(h, 0, sizeof h);
    const int32_t v[8] = {NNT_LLMC_MAGIC,  NNT_LLMC_VERSION_FP32, cfg->max_seq_len,
                          cfg->vocab_size, cfg->num_layers,       cfg->num_heads,
                          cfg->channels,   cfg->padded_vocab_size};
    for (int i = 0; i < 8; i++)
        nnt_io_put_le32(h + 4 * i, (uint32_t)v[i]);
    if ((rc = nnt_io_out_write(w->out, h, sizeof h, err, errlen)) != 0) {
        nnt_io_out_abort(w->out);
        free(w);
        return rc;
    }
    w->left = total;
    w->failed = 0;
    *out = w;
    return 0;
}

int nnt_llmc_writer_write(nnt_llmc_writer *w, const float *data, size_t count, char *err,
                          size_t errlen)
{
    if (!w || (!data && count))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "llm.c checkpoint: NULL writer or data");
    if (w->failed)
        return nnt_io_errf(err, errlen, w->failed, "llm.c checkpoint: write after a failure");
    if (count > w->left)
        return nnt_io_errf(err, errlen, NNT_E_INVAL,
                           "llm.c checkpoint: %zu floats written but only %llu more are expected",
                           count, (unsigned long long)w->left);
    int rc = nnt_io_out_write_le(w->out, data, count, 4, err, errlen);
    if (rc == 0)
        w->left -= count;
    else
        w->failed = rc;
    return rc;
}

void nnt_llmc_writer_abort(nnt_llmc_writer *w)
{
    if (!w)
        return;
    nnt_io_out_abort(w->out);
    free(w);
}

int nnt_llmc_writer_finish(nnt_llmc_writer *w, char *err, size_t errlen)
{
    if (!w)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "llm.c checkpoint: writer is NULL");
    if (w->failed) {
        int rc = nnt_io_errf(err, errlen, w->failed,
                             "llm.c checkpoint: finish after a failed write (nothing written)");
        nnt_llmc_writer_abort(w);
        return rc;
    }
    if (w->left) {
        int rc = nnt_io_errf(err, errlen, NNT_E_INVAL,
                             "llm.c checkpoint: %llu floats missing (nothing written)",
                             (unsigned long long)w->left);
        nnt_llmc_writer_abort(w);
        return rc;
    }
    int rc = nnt_io_out_commit(w->out, err, errlen);
    free(w);
    return rc;
}

int nnt_llmc_write(const char *path, const nnt_llmc_config *cfg,
                   const float *const params[NNT_LLMC_NPARAMS], char *err, size_t errlen)
{
    nnt_llmc_param p[NNT_LLMC_NPARAMS];
    int rc = nnt_llmc_layout(cfg, p, NULL, err, errlen);
    if (rc)
        return rc;
    if (!params)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "llm.c checkpoint: params is NULL");
    for (int i = 0; i < NNT_LLMC_NPARAMS; i++)
        if (!params[i])
            return nnt_io_errf(err, errlen, NNT_E_INVAL, "llm.c checkpoint: params[%d] (%s) is NULL",
                               i, names[i]);
    nnt_llmc_writer *w;
    if ((rc = nnt_llmc_writer_begin(path, cfg, &w, err, errlen)) != 0)
        return rc;
    for (int i = 0; i < NNT_LLMC_NPARAMS; i++) {
        if (p[i].numel > SIZE_MAX) {
            nnt_llmc_writer_abort(w);
            return nnt_io_errf(err, errlen, NNT_E_INVAL, "llm.c checkpoint: %s too large",
                               names[i]);
        }
        if ((rc = nnt_llmc_writer_write(w, params[i], (size_t)p[i].numel, err, errlen)) != 0) {
            nnt_llmc_writer_abort(w);
            return rc;
        }
    }
    return nnt_llmc_writer_finish(w, err, errlen);
}
