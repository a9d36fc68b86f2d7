/* SPDX-License-Identifier: MIT */
/* Token data, one reader for four formats:
 *   llm.c shards (dev/data/..., .bin): a 1024-byte header of 256 little-endian int32
 *       header[0] magic, header[1] version, header[2] number of tokens n (0..2^31 - 1),
 *       header[3..255] zero (not checked on reading),
 *     then n tokens, nothing else. Two kinds, told apart by magic and version:
 *       16-bit (GPT-2 vocabulary): magic 20240520, version 1, n little-endian uint16;
 *       32-bit (vocabularies above 65535, e.g. Llama 3's 128256): magic 20240801, version 7,
 *         n little-endian uint32 (ids below 2^31). This is the header llm.c's own data scripts
 *         (dev/data/data_common.py, "llama-3") write, so their Llama 3 shards read as they are;
 *     nnt's extension of both kinds (nnt-tokenize(1) writes it for prompt/answer data):
 *       header[1] the kind's version + 1 (2 for 16-bit, 8 for 32-bit), header[3] flags (bit 0:
 *       a loss-mask section follows the tokens; other bits must be 0), header[4] block (the
 *       row length T the examples were laid out in, n a multiple of it; 0: none), then after
 *       the n tokens, with flag bit 0, ceil(n / 8) bytes: bit i % 8 (least significant first)
 *       of byte i / 8 is 1 when token i counts as a target in the loss; then with flag bit 1
 *       (packed rows: several examples a row) another ceil(n / 8) bytes, bit i 1 when token i
 *       is an example's first token (older readers refuse the flag: they would let examples
 *       attend to each other); then with flag bit 2 (new in 0.4: rows of a classifier trained
 *       on values, its regression or multi-label targets) header[5] = K >= 1 and n / block
 *       rows of K little-endian float32 values, row by row (rows needed: block > 0). Readers
 *       that know only
 *       versions 1 and 7 (llm.c, nnt before 0.4) refuse such a file by its version;
 *   nanoGPT train.bin / val.bin: uint16 tokens, no header;
 *   text: any bytes, one token per byte (byte-level tokenizer, vocab 256).
 * Windows are read with pread: files are never loaded whole. */
#define _FILE_OFFSET_BITS 64
#include "io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct nnt_tok_reader {
    int fd;
    char *path;
    nnt_tok_format format;
    uint64_t count;                /* tokens                                                */
    uint64_t data_off;             /* byte offset of token 0                                */
    size_t elsize;                 /* 4 (uint32), 2 (uint16) or 1 (byte)                    */
    int32_t vocab;                 /* > 0: ids must be below it                             */
    uint64_t mask_off;             /* byte offset of the loss-mask section; 0: none         */
    uint64_t block;                /* rows of block tokens (the extension's header[4]); 0   */
    uint64_t starts_off;           /* byte offset of the example-start section; 0: none     */
    uint64_t values_off;           /* byte offset of the row-values section; 0: none        */
    int64_t values_k;              /* its values a row                                      */
};

static const char *format_name(nnt_tok_format f)
{
    switch (f) {
    case NNT_TOK_LLMC: return "llm.c token shard";
    case NNT_TOK_LLMC32: return "llm.c 32-bit token shard";
    case NNT_TOK_NANOGPT: return "nanoGPT token file";
    case NNT_TOK_TEXT: return "text";
    default: return "token data";
    }
}

void nnt_tok_close(nnt_tok_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    free(r->path);
    free(r);
}

/* The llm.c header: either kind (16- or 32-bit) whatever was asked, as the magic says; the
 * size must match the count exactly. Sets format, count, data_off, elsize. */
static int open_llmc(nnt_tok_reader *r, uint64_t size, char *err, size_t errlen)
{
    const char *path = r->path, *what = format_name(r->format);
    unsigned char h[NNT_TOK_HEADER_BYTES];
    if (size < sizeof h)
        return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                           "%s (%s): %llu bytes: too short for the %d-byte header", path, what,
                           (unsigned long long)size, NNT_TOK_HEADER_BYTES);
    int rc = nnt_io_pread(r->fd, h, sizeof h, 0, path, err, errlen);
    if (rc)
        return rc;
    int32_t magic = (int32_t)nnt_io_le32(h), version = (int32_t)nnt_io_le32(h + 4),
            n = (int32_t)nnt_io_le32(h + 8);
    if (magic != NNT_TOK_MAGIC && magic != NNT_TOK_MAGIC32)
        return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                           "%s (%s): bad magic %ld in header[0] (expected %d for 16-bit or %d "
                           "for 32-bit tokens)",
                           path, what, (long)magic, NNT_TOK_MAGIC, NNT_TOK_MAGIC32);
    int wide = magic == NNT_TOK_MAGIC32;
    r->format = wide ? NNT_TOK_LLMC32 : NNT_TOK_LLMC;
    what = format_name(r->format);
    int32_t want_version = wide ? NNT_TOK_VERSION32 : NNT_TOK_VERSION;
    int extended = version == want_version + 1;
    if (version != want_version && !extended)
        return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                           "%s (%s): unknown version %ld in header[1] (expected %ld after "
                           "magic %ld) (or %ld: nnt's extension with a loss mask)",
                           path, what, (long)version, (long)want_version, (long)magic,
                           (long)want_version + 1);
    if (n < 0)
        return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                           "%s (%s): negative token count %ld in header[2]", path, what,
                           (long)n);
    uint32_t flags = extended ? nnt_io_le32(h + 12) : 0;
    int32_t block = extended ? (int32_t)nnt_io_le32(h + 16) : 0;
    const uint32_t known = NNT_TOK_FLAG_MASK | NNT_TOK_FLAG_STARTS | NNT_TOK_FLAG_VALUES;
    if (flags & ~known)
        return nnt_io_errf(err, errlen, NNT_E_FORMAT, "%s (%s): unknown flags 0x%lx in "
                           "header[3] (known: 0x%x, a loss-mask section, 0x%x, example "
                           "starts, and 0x%x, row values)", path, what, (unsigned long)flags,
                           NNT_TOK_FLAG_MASK, NNT_TOK_FLAG_STARTS, NNT_TOK_FLAG_VALUES);
    if (block < 0 || (block > 0 && n % block))
        return nnt_io_errf(err, errlen, NNT_E_FORMAT, "%s (%s): header[4] gives rows of %ld "
                           "tokens, but header[2] = %ld tokens is not a whole number of them",
                           path, what, (long)block, (long)n);
    int32_t k = flags & NNT_TOK_FLAG_VALUES ? (int32_t)nnt_io_le32(h + 20) : 0;
    if ((flags & NNT_TOK_FLAG_VALUES) && (k < 1 || block < 1))
        return nnt_io_errf(err, errlen, NNT_E_FORMAT, "%s (%s): row values (flag 0x%x) with "
                           "%ld a row (header[5], >= 1) in rows of %ld tokens (header[4], "
                           ">= 1)", path, what, NNT_TOK_FLAG_VALUES, (long)k, (long)block);
    r->elsize = wide ? 4 : 2;
    uint64_t mask_bytes = flags & NNT_TOK_FLAG_MASK ? ((uint64_t)n + 7) / 8 : 0;
    uint64_t starts_bytes = flags & NNT_TOK_FLAG_STARTS ? ((uint64_t)n + 7) / 8 : 0;
    uint64_t values_bytes = k ? (uint64_t)(n / block) * (uint64_t)k * 4 : 0;
    uint64_t sections = NNT_TOK_HEADER_BYTES + r->elsize * (uint64_t)n + mask_bytes + starts_bytes;
    uint64_t want = sections + values_bytes;
    if (size != want)
        return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                           "%s (%s): %llu bytes, but header[2] = %ld tokens needs 1024 + %zu * "
                           "%ld%s%s%s = %llu bytes (%s)",
                           path, what, (unsigned long long)size, (long)n, r->elsize, (long)n,
                           mask_bytes ? " + the loss mask's (n + 7) / 8" : "",
                           starts_bytes ? " + the example starts' (n + 7) / 8" : "",
                           values_bytes ? " + the row values' 4 k n / block" : "",
                           (unsigned long long)want,
                           size < want ? "truncated" : "extra bytes at the end");
    r->mask_off = mask_bytes ? NNT_TOK_HEADER_BYTES + r->elsize * (uint64_t)n : 0;
    r->starts_off = starts_bytes ? NNT_TOK_HEADER_BYTES + r->elsize * (uint64_t)n + mask_bytes
                                 : 0;
    r->values_off = k ? sections : 0;
    r->values_k = k;
    r->block = (uint64_t)block;
    r->count = (uint64_t)n;
    r->data_off = NNT_TOK_HEADER_BYTES;
    return 0;
}

int nnt_tok_open(const char *path, nnt_tok_format format, int32_t vocab, nnt_tok_reader **out,
                 char *err, size_t errlen)
{
    if (!out || !path)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "token data: NULL argument");
    *out = NULL;
    if ((unsigned)format > NNT_TOK_LLMC32)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: unknown token format %d", path,
                           (int)format);
    if (vocab < 0)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: vocab %ld < 0", path, (long)vocab);
    nnt_tok_reader *r = calloc(1, sizeof *r);
    size_t len = strlen(path);
    if (r)
        r->path = malloc(len + 1);
    if (!r || !r->path) {
        free(r);
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory", path);
    }
    memcpy(r->path, path, len + 1);
    r->vocab = vocab;
    uint64_t size;
    int rc = nnt_io_open_read(path, &r->fd, &size, err, errlen);
    if (rc)
        goto fail;
    if (format == NNT_TOK_AUTO) {
        unsigned char m[4];
        if (size >= 4 && (rc = nnt_io_pread(r->fd, m, 4, 0, path, err, errlen)) != 0)
            goto fail;
        if (size >= 4 && nnt_io_le32(m) == NNT_TOK_MAGIC)
            format = NNT_TOK_LLMC;
        else if (size >= 4 && nnt_io_le32(m) == NNT_TOK_MAGIC32)
            format = NNT_TOK_LLMC32;
        else if (len >= 4 && strcmp(path + len - 4, ".bin") == 0)
            format = NNT_TOK_NANOGPT;
        else
            format = NNT_TOK_TEXT;
    }
    r->format = format;
    const char *what = format_name(format);
    switch (format) {
    case NNT_TOK_LLMC:
    case NNT_TOK_LLMC32:
        if ((rc = open_llmc(r, size, err, errlen)) != 0)
            goto fail;
        break;
    case NNT_TOK_NANOGPT:
        if (size % 2) {
            rc = nnt_io_errf(err, errlen, NNT_E_FORMAT,
                             "%s (%s): odd size %llu bytes: not a stream of uint16 tokens "
                             "(truncated?)",
                             path, what, (unsigned long long)size);
            goto fail;
        }
        r->count = size / 2;
        r->elsize = 2;
        break;
    default: /* TEXT */
        r->count = size;
        r->elsize = 1;
        break;
    }
    *out = r;
    return 0;
fail:
    nnt_tok_close(r);
    return rc;
}

uint64_t nnt_tok_count(const nnt_tok_reader *r) { return r ? r->count : 0; }

nnt_tok_format nnt_tok_format_of(const nnt_tok_reader *r) { return r ? r->format : NNT_TOK_AUTO; }

int nnt_tok_has_mask(const nnt_tok_reader *r) { return r && r->mask_off; }

uint64_t nnt_tok_block(const nnt_tok_reader *r) { return r ? r->block : 0; }

int nnt_tok_has_starts(const nnt_tok_reader *r) { return r && r->starts_off; }

/* The bits of tokens [start, start + count) of the bit section at off (0: none, every bit
 * absent_value) into out, one byte each. */
static int read_bits(const nnt_tok_reader *r, uint64_t off, const char *what, uint64_t start,
                     size_t count, uint8_t *out, int absent_value, char *err, size_t errlen)
{
    if (!r || (!out && count))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "token data: NULL reader or buffer");
    if (start > r->count || count > r->count - start)
        return nnt_io_errf(err, errlen, NNT_E_INVAL,
                           "%s: %s of tokens [%llu, %llu + %zu) outside the %llu tokens of "
                           "the file", r->path, what, (unsigned long long)start,
                           (unsigned long long)start, count, (unsigned long long)r->count);
    if (!off) {
        memset(out, absent_value, count);
        return 0;
    }
    unsigned char buf[1 << 12];
    for (size_t done = 0; done < count;) {
        uint64_t first = (start + done) / 8;          /* byte of the next token's bit */
        uint64_t last = (start + count - 1) / 8;
        size_t nb = last - first + 1 < sizeof buf ? (size_t)(last - first + 1) : sizeof buf;
        int rc = nnt_io_pread(r->fd, buf, nb, off + first, r->path, err, errlen);
        if (rc)
            return rc;
        for (uint64_t i = start + done; done < count && i / 8 < first + nb; i++, done++)
            out[done] = (buf[i / 8 - first] >> (i % 8)) & 1u;
    }
    return 0;
}

int nnt_tok_read_mask(const nnt_tok_reader *r, uint64_t start, size_t count, uint8_t *out,
                      char *err, size_t errlen)
{
    return read_bits(r, r ? r->mask_off : 0, "mask", start, count, out, 1, err, errlen);
}

int nnt_tok_read_starts(const nnt_tok_reader *r, uint64_t start, size_t count, uint8_t *out,
                        char *err, size_t errlen)
{
    return read_bits(r, r ? r->starts_off : 0, "example starts", start, count, out, 0, err,
                     errlen);
}

int64_t nnt_tok_row_values(const nnt_tok_reader *r) { return r ? r->values_k : 0; }

int nnt_tok_read_values(const nnt_tok_reader *r, uint64_t row, size_t nrows, float *out,
                        char *err, size_t errlen)
{
    if (!r || (!out && nrows))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "token data: NULL reader or buffer");
    uint64_t rows = r->block ? r->count / r->block : 0;
    if (!r->values_off || row > rows || nrows > rows - row)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: the values of rows [%llu, %llu + "
                           "%zu): the file has %s", r->path, (unsigned long long)row,
                           (unsigned long long)row, nrows, r->values_off ? "fewer rows"
                                                                         : "no row values");
    size_t k = (size_t)r->values_k;
    unsigned char buf[1 << 12];
    size_t per = sizeof buf / 4, total = nrows * k;
    for (size_t done = 0; done < total;) {
        size_t m = total - done < per ? total - done : per;
        int rc = nnt_io_pread(r->fd, buf, m * 4, r->values_off + (row * k + done) * 4, r->path,
                              err, errlen);
        if (rc)
            return rc;
        for (size_t i = 0; i < m; i++) {
            uint32_t bits = nnt_io_le32(buf + 4 * i);
            float v;
            memcpy(&v, &bits, sizeof v);
            if (!isfinite(v))
                return nnt_io_errf(err, errlen, NNT_E_FORMAT, "%s: value %zu of row %llu is "
                                   "%g (row values must be finite)", r->path, (done + i) % k,
                                   (unsigned long long)(row + (done + i) / k), (double)v);
            out[done + i] = v;
        }
        done += m;
    }
    return 0;
}

int nnt_tok_read(const nnt_tok_reader *r, uint64_t start, size_t count, int32_t *out, char *err,
                 size_t errlen)
{
    if (!r || (!out && count))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "token data: NULL reader or buffer");
    if (start > r->count || count > r->count - start)
        return nnt_io_errf(err, errlen, NNT_E_INVAL,
                           "%s: tokens [%llu, %llu + %zu) outside the %llu tokens of the file",
                           r->path, (unsigned long long)start, (unsigned long long)start, count,
                           (unsigned long long)r->count);
    unsigned char buf[1 << 14];
    size_t per = sizeof buf / r->elsize, done = 0;
    while (done < count) {
        size_t k = count - done < per ? count - done : per;
        uint64_t pos = start + done;
        int rc = nnt_io_pread(r->fd, buf, k * r->elsize, r->data_off + pos * r->elsize, r->path,
                              err, errlen);
        if (rc)
            return rc;
        int32_t *o = out + done;
        if (r->elsize == 4) {
            for (size_t i = 0; i < k; i++) {
                uint32_t t = nnt_io_le32(buf + 4 * i);
                if (t > INT32_MAX)
                    return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                                       "%s (%s): token %lu at position %llu is above 2^31 - 1",
                                       r->path, format_name(r->format), (unsigned long)t,
                                       (unsigned long long)(pos + i));
                o[i] = (int32_t)t;
            }
        } else if (r->elsize == 2)
            for (size_t i = 0; i < k; i++)
                o[i] = nnt_io_le16(buf + 2 * i);
        else
            for (size_t i = 0; i < k; i++)
                o[i] = buf[i];
        if (r->vocab > 0)
            for (size_t i = 0; i < k; i++)
                if (o[i] >= r->vocab)
                    return nnt_io_errf(err, errlen, NNT_E_FORMAT,
                                       "%s (%s): token %ld at position %llu (byte %llu) is not "
                                       "below the vocabulary size %ld",
                                       r->path, format_name(r->format), (long)o[i],
                                       (unsigned long long)(pos + i),
                                       (unsigned long long)(r->data_off + (pos + i) * r->elsize),
                                       (long)r->vocab);
        done += k;
    }
    return 0;
}

/* ---- writing ---------------------------------------------------------------------------- */

struct nnt_tok_writer {
    nnt_io_out *out;
    nnt_tok_format format;
    int32_t max;                   /* largest id the format (and the vocabulary) allows     */
    int64_t vocab;                 /* > 0: the vocabulary that set max                      */
    size_t elsize;                 /* 4, 2 or 1 bytes a token                               */
    uint64_t count;                /* tokens written                                        */
    int failed;                    /* an I/O error happened: only finish/abort remain       */
    int extended;                  /* nnt's extension: version + 1, flags, block           */
    int masked;                    /* a loss-mask section (held here until finish)         */
    uint64_t block;                /* rows of block tokens (0: none)                       */
    unsigned char *mask;           /* (cap_mask) bytes: bit i % 8 of byte i / 8: token i   */
    size_t cap_mask;
    int starts;                    /* an example-start section (held here until finish)    */
    unsigned char *start_bits;     /* (cap_starts) bytes, as mask: token i starts an example */
    size_t cap_starts;
    int64_t values_k;              /* > 0: a row-values section of values_k floats a row     */
    float *values;                 /* (cap_rows, values_k) row by row (held until finish)   */
    unsigned char *has_values;     /* (cap_rows) 1 when the row's values were given          */
    uint64_t cap_rows;
};

int nnt_tok_writer_begin(const char *path, nnt_tok_format format, int64_t vocab,
                         nnt_tok_writer **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!path)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "token data: NULL argument");
    if (format != NNT_TOK_LLMC && format != NNT_TOK_LLMC32 && format != NNT_TOK_NANOGPT &&
        format != NNT_TOK_TEXT)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: cannot write token format %d", path,
                           (int)format);
    int32_t max = format == NNT_TOK_TEXT ? 255 : format == NNT_TOK_LLMC32 ? INT32_MAX : 65535;
    if (vocab < 0)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): vocabulary size %lld", path,
                           format_name(format), (long long)vocab);
    if (vocab - 1 > max)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): a vocabulary of %lld ids does "
                           "not fit in ids 0..%ld", path, format_name(format), (long long)vocab,
                           (long)max);
    nnt_tok_writer *w = calloc(1, sizeof *w);
    if (!w)
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory", path);
    w->format = format;
    w->vocab = vocab;
    w->max = vocab > 0 ? (int32_t)(vocab - 1) : max;
    w->elsize = format == NNT_TOK_TEXT ? 1 : format == NNT_TOK_LLMC32 ? 4 : 2;
    int rc = nnt_io_out_begin(path, &w->out, err, errlen);
    if (rc == 0 && (format == NNT_TOK_LLMC || format == NNT_TOK_LLMC32)) {
        unsigned char h[NNT_TOK_HEADER_BYTES];   /* the count is filled in at the end */
        nnt_tok_header(h, format == NNT_TOK_LLMC32, 0);
        rc = nnt_io_out_write(w->out, h, sizeof h, err, errlen);
    }
    if (rc) {
        nnt_tok_writer_abort(w);
        return rc;
    }
    *out = w;
    return 0;
}

int nnt_tok_writer_extend(nnt_tok_writer *w, int masked, uint64_t block, char *err,
                          size_t errlen)
{
    const char *path = nnt_io_out_path(w->out), *what = format_name(w->format);
    if (w->format != NNT_TOK_LLMC && w->format != NNT_TOK_LLMC32)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): a loss mask or rows need an "
                           "llm.c header", path, what);
    if (w->count)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): the layout is set before the "
                           "first token", path, what);
    if (block > (uint64_t)INT32_MAX)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): rows of %llu tokens: at most "
                           "2^31 - 1", path, what, (unsigned long long)block);
    w->extended = masked || block;
    w->masked = masked != 0;
    w->block = block;
    return 0;
}

/* Room in the bit array *bits (*cap bytes) for n more tokens (zeroed). */
static int grow_bits(nnt_tok_writer *w, unsigned char **bits, size_t *cap_bits, size_t n,
                     const char *what, char *err, size_t errlen)
{
    size_t need = (size_t)((w->count + n + 7) / 8);
    if (need <= *cap_bits)
        return 0;
    size_t cap = *cap_bits ? *cap_bits : 4096;
    while (cap < need)
        cap *= 2;
    unsigned char *m = realloc(*bits, cap);
    if (!m)
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory for the %s of %llu "
                           "tokens", nnt_io_out_path(w->out), what,
                           (unsigned long long)(w->count + n));
    memset(m + *cap_bits, 0, cap - *cap_bits);
    *bits = m;
    *cap_bits = cap;
    return 0;
}

/* Room in the mask (and the start bits) for n more tokens (zeroed). */
static int grow_mask(nnt_tok_writer *w, size_t n, char *err, size_t errlen)
{
    int rc = grow_bits(w, &w->mask, &w->cap_mask, n, "loss mask", err, errlen);
    if (rc == 0 && w->starts)
        rc = grow_bits(w, &w->start_bits, &w->cap_starts, n, "example starts", err, errlen);
    return rc;
}

int nnt_tok_writer_record_starts(nnt_tok_writer *w, char *err, size_t errlen)
{
    const char *path = nnt_io_out_path(w->out), *what = format_name(w->format);
    if (!w->extended || w->count)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): example starts are set after "
                           "the extension and before the first token", path, what);
    w->starts = 1;
    return 0;
}

int nnt_tok_writer_record_values(nnt_tok_writer *w, int64_t k, char *err, size_t errlen)
{
    const char *path = nnt_io_out_path(w->out), *what = format_name(w->format);
    if (!w->block || w->count || w->values_k || k < 1 || k > INT32_MAX)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): row values (%lld a row, >= 1) "
                           "are set once, after the extension with rows and before the first "
                           "token", path, what, (long long)k);
    w->values_k = k;
    return 0;
}

int nnt_tok_writer_row_values(nnt_tok_writer *w, uint64_t row, const float *values, char *err,
                              size_t errlen)
{
    const char *path = nnt_io_out_path(w->out), *what = format_name(w->format);
    size_t k = (size_t)w->values_k;
    if (!k || !values)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): %s", path, what,
                           k ? "NULL values" : "the writer records no row values");
    for (size_t i = 0; i < k; i++)
        if (!isfinite(values[i]))
            return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): value %zu of row %llu is %g "
                               "(row values must be finite)", path, what, i,
                               (unsigned long long)row, (double)values[i]);
    if (row >= w->cap_rows) {
        uint64_t cap = w->cap_rows ? w->cap_rows : 1024;
        while (cap <= row)
            cap *= 2;
        float *v = realloc(w->values, (size_t)cap * k * sizeof *v);
        if (v)
            w->values = v;
        unsigned char *h = v ? realloc(w->has_values, (size_t)cap) : NULL;
        if (!h)
            return nnt_io_errf(err, errlen, NNT_E_NOMEM, "%s: out of memory for the values of "
                               "%llu rows", path, (unsigned long long)cap);
        memset(h + w->cap_rows, 0, (size_t)(cap - w->cap_rows));
        w->has_values = h;
        w->cap_rows = cap;
    }
    if (w->has_values[row])
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): the values of row %llu are given "
                           "twice", path, what, (unsigned long long)row);
    memcpy(w->values + row * k, values, k * sizeof *values);
    w->has_values[row] = 1;
    return 0;
}

/* The row-values section: every row's values, little-endian (finish) */
static int write_values(nnt_tok_writer *w, char *err, size_t errlen)
{
    uint64_t rows = w->count / w->block;
    size_t k = (size_t)w->values_k;
    for (uint64_t r = 0; r < rows; r++)
        if (r >= w->cap_rows || !w->has_values[r])
            return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): row %llu of %llu has no "
                               "values", nnt_io_out_path(w->out), format_name(w->format),
                               (unsigned long long)r, (unsigned long long)rows);
    unsigned char buf[1 << 12];
    size_t per = sizeof buf / 4, total = (size_t)rows * k;
    int rc = 0;
    for (size_t done = 0; rc == 0 && done < total;) {
        size_t m = total - done < per ? total - done : per;
        for (size_t i = 0; i < m; i++) {
            uint32_t bits;
            memcpy(&bits, &w->values[done + i], sizeof bits);
            nnt_io_put_le32(buf + 4 * i, bits);
        }
        rc = nnt_io_out_write(w->out, buf, m * 4, err, errlen);
        done += m;
    }
    return rc;
}

int nnt_tok_writer_mark_start(nnt_tok_writer *w, char *err, size_t errlen)
{
    if (!w->starts)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): the writer records no example "
                           "starts", nnt_io_out_path(w->out), format_name(w->format));
    int rc = grow_bits(w, &w->start_bits, &w->cap_starts, 1, "example starts", err, errlen);
    if (rc == 0)
        w->start_bits[w->count / 8] |= (unsigned char)(1u << (w->count % 8));
    return rc;
}

int nnt_tok_writer_write(nnt_tok_writer *w, const int32_t *tokens, size_t n, char *err,
                         size_t errlen)
{
    return nnt_tok_writer_write_masked(w, tokens, NULL, n, err, errlen);
}

int nnt_tok_writer_write_masked(nnt_tok_writer *w, const int32_t *tokens, const uint8_t *counts,
                                size_t n, char *err, size_t errlen)
{
    const char *path = nnt_io_out_path(w->out), *what = format_name(w->format);
    if (w->failed)
        return nnt_io_errf(err, errlen, w->failed, "%s (%s): a write after an earlier failure",
                           path, what);
    if (!tokens && n)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "token data: NULL argument");
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] > w->max) {
            if (w->vocab > 0)
                return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): token %ld at position "
                                   "%llu is outside 0..%ld (a vocabulary of %lld ids)", path,
                                   what, (long)tokens[i], (unsigned long long)(w->count + i),
                                   (long)w->max, (long long)w->vocab);
            return nnt_io_errf(err, errlen, NNT_E_INVAL,
                               "%s (%s): token %ld at position %llu is outside 0..%ld", path,
                               what, (long)tokens[i], (unsigned long long)(w->count + i),
                               (long)w->max);
        }
    int llmc = w->format == NNT_TOK_LLMC || w->format == NNT_TOK_LLMC32;
    if (llmc && n > (uint64_t)INT32_MAX - w->count)
        return nnt_io_errf(err, errlen, NNT_E_INVAL,
                           "%s (%s): %llu tokens: at most 2^31 - 1 fit in a shard", path, what,
                           (unsigned long long)(w->count + n));
    if (counts && !w->masked)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): a loss mask was not asked for "
                           "when the file was begun", path, what);
    if ((w->masked || w->starts) && grow_mask(w, n, err, errlen))
        return NNT_E_NOMEM;
    unsigned char buf[1 << 14];
    size_t es = w->elsize, per = sizeof buf / es;
    int rc = 0;
    for (size_t done = 0; rc == 0 && done < n;) {
        size_t k = n - done < per ? n - done : per;
        for (size_t i = 0; i < k; i++) {
            uint32_t t = (uint32_t)tokens[done + i];
            if (es == 4) {
                nnt_io_put_le32(buf + 4 * i, t);
            } else if (es == 2) {
                buf[2 * i] = (unsigned char)t;
                buf[2 * i + 1] = (unsigned char)(t >> 8);
            } else {
                buf[i] = (unsigned char)t;
            }
        }
        rc = nnt_io_out_write(w->out, buf, k * es, err, errlen);
        done += k;
    }
    if (rc) {
        w->failed = rc;
        return rc;
    }
    /* a row's first token is never a target: nothing of its row comes before it */
    for (size_t i = 0; w->masked && i < n; i++) {
        uint64_t at = w->count + i;
        if ((!counts || counts[i]) && !(w->block && at % w->block == 0))
            w->mask[at / 8] |= (unsigned char)(1u << (at % 8));
    }
    w->count += n;
    return 0;
}

uint64_t nnt_tok_writer_count(const nnt_tok_writer *w) { return w ? w->count : 0; }

void nnt_tok_writer_abort(nnt_tok_writer *w)
{
    if (!w)
        return;
    nnt_io_out_abort(w->out);
    free(w->mask);
    free(w->start_bits);
    free(w->values);
    free(w->has_values);
    free(w);
}

int nnt_tok_writer_finish(nnt_tok_writer *w, char *err, size_t errlen)
{
    int rc = w->failed;
    if (rc) {
        rc = nnt_io_errf(err, errlen, rc, "%s (%s): not written: an earlier write failed",
                         nnt_io_out_path(w->out), format_name(w->format));
    } else if (w->block && w->count % w->block) {
        rc = nnt_io_errf(err, errlen, NNT_E_INVAL, "%s (%s): %llu tokens are not whole rows "
                         "of %llu", nnt_io_out_path(w->out), format_name(w->format),
                         (unsigned long long)w->count, (unsigned long long)w->block);
    } else if (w->format == NNT_TOK_LLMC || w->format == NNT_TOK_LLMC32) {
        unsigned char h[NNT_TOK_HEADER_BYTES];
        nnt_tok_header(h, w->format == NNT_TOK_LLMC32, (size_t)w->count);
        if (w->extended) {
            nnt_io_put_le32(h + 4, nnt_io_le32(h + 4) + 1);
            nnt_io_put_le32(h + 12, (w->masked ? NNT_TOK_FLAG_MASK : 0) |
                                        (w->starts ? NNT_TOK_FLAG_STARTS : 0) |
                                        (w->values_k ? NNT_TOK_FLAG_VALUES : 0));
            nnt_io_put_le32(h + 16, (uint32_t)w->block);
            nnt_io_put_le32(h + 20, (uint32_t)w->values_k);
        }
        if (w->masked && w->count)
            rc = nnt_io_out_write(w->out, w->mask, (size_t)((w->count + 7) / 8), err, errlen);
        if (rc == 0 && w->starts && w->count)
            rc = nnt_io_out_write(w->out, w->start_bits, (size_t)((w->count + 7) / 8), err,
                                  errlen);
        if (rc == 0 && w->values_k)
            rc = write_values(w, err, errlen);
        if (rc == 0)
            rc = nnt_io_out_pwrite(w->out, h, sizeof h, 0, err, errlen);
    }
    if (rc) {
        nnt_tok_writer_abort(w);
        return rc;
    }
    rc = nnt_io_out_commit(w->out, err, errlen);   /* frees the output either way */
    free(w->mask);
    free(w->start_bits);
    free(w->values);
    free(w->has_values);
    free(w);
    return rc;
}

int nnt_tok_write(const char *path, nnt_tok_format format, const int32_t *tokens, size_t n,
                  char *err, size_t errlen)
{
    if (!path || (!tokens && n))
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "token data: NULL argument");
    nnt_tok_writer *w;
    int rc = nnt_tok_writer_begin(path, format, 0, &w, err, errlen);
    if (rc)
        return rc;
    if ((rc = nnt_tok_writer_write(w, tokens, n, err, errlen)) != 0) {
        nnt_tok_writer_abort(w);
        return rc;
    }
    return nnt_tok_writer_finish(w, err, errlen);
}

void nnt_tok_header(unsigned char h[NNT_TOK_HEADER_BYTES], int wide, size_t n)
{
    memset(h, 0, NNT_TOK_HEADER_BYTES);
    nnt_io_put_le32(h, wide ? NNT_TOK_MAGIC32 : NNT_TOK_MAGIC);
    nnt_io_put_le32(h + 4, wide ? NNT_TOK_VERSION32 : NNT_TOK_VERSION);
    nnt_io_put_le32(h + 8, (uint32_t)n);
}
