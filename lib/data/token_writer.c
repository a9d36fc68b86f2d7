/* SPDX-License-Identifier: MIT */
/* nnt_token_writer: the public streaming writer of llm.c token files (what nnt_data_open reads
 * as NNT_DATA_LLMC), over lib/io's nnt_tok_writer: 16-bit ids (magic 20240520, version 1) or
 * 32-bit ids (llm.c's Llama 3 header, magic 20240801, version 7), the count put in the header
 * at close, the file put in place atomically (temporary file, fsync, rename). With the mask or
 * block options, nnt's extension (lib/io/tokens.c): which tokens count in the loss, and rows
 * of block tokens that write_example lays whole examples in (padded or packed, never
 * continued into the next row); packed, the file also records where each example starts.
 * Failures are recorded in the writer's context when it was given one and is still live, else
 * as the calling thread's last error (nnt_ctx_last_error(NULL)). */
#include "../internal.h"
#include "../io/io.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

struct nnt_token_writer {
    nnt_ctx *ctx;                  /* for messages; may be NULL or destroyed since          */
    nnt_tok_writer *w;
    nnt_token_writer_options o;
    int64_t top;                   /* the largest id allowed                               */
};

/* Where a failure is recorded: the writer's context while it is live. */
static nnt_ctx *err_ctx(nnt_ctx *ctx)
{
    return ctx && nnt_ctx_check(ctx, NULL) == 0 ? ctx : NULL;
}

int nnt_token_writer_open(nnt_ctx *ctx, const char *path, const nnt_token_writer_options *opts,
                          nnt_token_writer **out)
{
    static const char fn[] = "nnt_token_writer_open";
    nnt_ctx *ec = err_ctx(ctx);
    if (!out)
        return nnt_fail(ec, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    if (ctx && !ec)
        return nnt_ctx_check(ctx, fn);   /* a context that is not live: NNT_E_STATE */
    if (!path || !*path)
        return nnt_fail(ec, NNT_E_INVAL, "%s: path is NULL or empty", fn);
    static const nnt_token_writer_options defaults = NNT_TOKEN_WRITER_OPTIONS_INIT;
    nnt_token_writer_options o;
    int rc = nnt_read_options(fn, opts, &defaults, &o, sizeof o,
                              offsetof(nnt_token_writer_options, row_values),   /* 0.3's */
                              "initialise them with NNT_TOKEN_WRITER_OPTIONS_INIT");
    if (rc)
        return ec ? nnt_fail(ec, rc, "%s", nnt_ctx_last_error(NULL)) : rc;
    if (o.bits != 0 && o.bits != 16 && o.bits != 32)
        return nnt_fail(ec, NNT_E_INVAL, "%s: %s: bits %d (use 16, 32, or 0 to choose by the "
                        "vocabulary size)", fn, path, o.bits);
    if (o.vocab < 0 || o.vocab > (int64_t)INT32_MAX + 1)
        return nnt_fail(ec, NNT_E_INVAL, "%s: %s: vocabulary size %lld is outside 0..2^31 "
                        "(0: no check)", fn, path, (long long)o.vocab);
    if (o.bits == 0)
        o.bits = o.vocab > 65536 ? 32 : 16;
    if (o.bits == 16 && o.vocab > 65536)
        return nnt_fail(ec, NNT_E_INVAL, "%s: %s: a vocabulary of %lld ids does not fit in "
                        "16-bit ids (use bits 32: llm.c's Llama 3 header)", fn, path,
                        (long long)o.vocab);
    if (o.mask != 0 && o.mask != 1)
        return nnt_fail(ec, NNT_E_INVAL, "%s: %s: mask %d (0 or 1)", fn, path, o.mask);
    if (o.block < 0 || o.block > INT32_MAX)
        return nnt_fail(ec, NNT_E_INVAL, "%s: %s: block %lld is outside 0..2^31 - 1", fn, path,
                        (long long)o.block);
    if (o.pack != 0 && o.pack != 1)
        return nnt_fail(ec, NNT_E_INVAL, "%s: %s: pack %d (0 or 1)", fn, path, o.pack);
    if (o.cut != 0 && o.cut != 1)
        return nnt_fail(ec, NNT_E_INVAL, "%s: %s: cut %d (0 or 1)", fn, path, o.cut);
    int64_t top = o.vocab > 0 ? o.vocab - 1 : o.bits == 16 ? 65535 : INT32_MAX;
    if (o.pad < 0 || o.pad > top)
        return nnt_fail(ec, NNT_E_INVAL, "%s: %s: pad id %ld is outside 0..%lld", fn, path,
                        (long)o.pad, (long long)top);
    if (o.row_values < 0 || o.row_values > INT32_MAX ||
        (o.row_values && (!o.mask || !o.block || o.pack)))
        return nnt_fail(ec, NNT_E_INVAL, "%s: %s: row_values %lld (>= 0; values a row need the "
                        "mask and block options, one example a row: not pack)", fn, path,
                        (long long)o.row_values);
    nnt_token_writer *tw = calloc(1, sizeof *tw);
    if (!tw)
        return nnt_fail(ec, NNT_E_NOMEM, "%s: out of host memory", fn);
    char err[NNT_IO_ERRLEN];
    rc = nnt_tok_writer_begin(path, o.bits == 32 ? NNT_TOK_LLMC32 : NNT_TOK_LLMC, o.vocab,
                              &tw->w, err, sizeof err);
    if (rc == 0 && (o.mask || o.block) &&
        (rc = nnt_tok_writer_extend(tw->w, o.mask, (uint64_t)o.block, err, sizeof err)) != 0)
        nnt_tok_writer_abort(tw->w);
    /* packed rows record where each example starts (per-example positions and attention) */
    else if (rc == 0 && o.pack && o.mask && o.block &&
             (rc = nnt_tok_writer_record_starts(tw->w, err, sizeof err)) != 0)
        nnt_tok_writer_abort(tw->w);
    else if (rc == 0 && o.row_values &&
             (rc = nnt_tok_writer_record_values(tw->w, o.row_values, err, sizeof err)) != 0)
        nnt_tok_writer_abort(tw->w);
    if (rc) {
        free(tw);
        return nnt_fail(ec, rc, "%s: %s", fn, err);
    }
    tw->ctx = ctx;
    tw->o = o;
    tw->top = top;
    *out = tw;
    return NNT_OK;
}

/* A writer of row values takes whole examples with their values only. */
static int no_row_values(const nnt_token_writer *w, const char *fn)
{
    if (!w->o.row_values)
        return NNT_OK;
    return nnt_fail(err_ctx(w->ctx), NNT_E_INVAL, "%s: the writer records %lld values a row: "
                    "give examples with theirs (nnt_token_writer_write_example_values)", fn,
                    (long long)w->o.row_values);
}

int nnt_token_writer_write(nnt_token_writer *w, const int32_t *ids, size_t n)
{
    static const char fn[] = "nnt_token_writer_write";
    if (!w)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: writer is NULL", fn);
    nnt_ctx *ec = err_ctx(w->ctx);
    if (!ids && n)
        return nnt_fail(ec, NNT_E_INVAL, "%s: ids is NULL", fn);
    NNT_TRY(no_row_values(w, fn));
    char err[NNT_IO_ERRLEN];
    int rc = nnt_tok_writer_write(w->w, ids, n, err, sizeof err);
    return rc ? nnt_fail(ec, rc, "%s: %s", fn, err) : NNT_OK;
}

int nnt_token_writer_write_masked(nnt_token_writer *w, const int32_t *ids,
                                  const uint8_t *counts, size_t n)
{
    static const char fn[] = "nnt_token_writer_write_masked";
    if (!w)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: writer is NULL", fn);
    nnt_ctx *ec = err_ctx(w->ctx);
    if (!ids && n)
        return nnt_fail(ec, NNT_E_INVAL, "%s: ids is NULL", fn);
    if (!w->o.mask)
        return nnt_fail(ec, NNT_E_INVAL, "%s: the writer was opened without the mask option",
                        fn);
    NNT_TRY(no_row_values(w, fn));
    char err[NNT_IO_ERRLEN];
    int rc = nnt_tok_writer_write_masked(w->w, ids, counts, n, err, sizeof err);
    return rc ? nnt_fail(ec, rc, "%s: %s", fn, err) : NNT_OK;
}

/* k pad tokens (not targets). */
static int write_pad(nnt_token_writer *w, int64_t k, char *err, size_t errlen)
{
    int32_t pad[256];
    uint8_t none[256] = {0};
    for (int i = 0; i < 256; i++)
        pad[i] = w->o.pad;
    int rc = 0;
    for (int64_t done = 0; rc == 0 && done < k; done += 256)
        rc = nnt_tok_writer_write_masked(w->w, pad, w->o.mask ? none : NULL,
                                         (size_t)(k - done < 256 ? k - done : 256), err, errlen);
    return rc;
}

/* write_example's work for fn: the example laid in rows; *row (may be NULL) the row it
 * starts in. */
static int write_example(nnt_token_writer *w, const char *fn, const int32_t *ids,
                         const uint8_t *counts, size_t n, uint64_t *row)
{
    nnt_ctx *ec = err_ctx(w->ctx);
    if (!ids && n)
        return nnt_fail(ec, NNT_E_INVAL, "%s: ids is NULL", fn);
    if (!w->o.mask || !w->o.block)
        return nnt_fail(ec, NNT_E_INVAL, "%s: the writer was opened without the mask and block "
                        "options", fn);
    if (n == 0)
        return NNT_OK;
    int64_t T = w->o.block;
    if ((uint64_t)n > (uint64_t)T && !w->o.cut)
        return nnt_fail(ec, NNT_E_INVAL, "%s: an example of %zu tokens does not fit in a row of "
                        "%lld (the cut option keeps its first %lld)", fn, n, (long long)T,
                        (long long)T);
    int64_t len = (uint64_t)n > (uint64_t)T ? T : (int64_t)n;
    for (int64_t i = 0; i < len; i++)   /* refused whole, before anything is written */
        if (ids[i] < 0 || ids[i] > w->top)
            return nnt_fail(ec, NNT_E_INVAL, "%s: id %ld at position %lld of the example is "
                            "outside 0..%lld", fn, (long)ids[i], (long long)i,
                            (long long)w->top);
    char err[NNT_IO_ERRLEN];
    int rc = 0;
    int64_t used = (int64_t)(nnt_tok_writer_count(w->w) % (uint64_t)T);
    /* a new row unless packing and the example fits in the rest of this one */
    if (used > 0 && (!w->o.pack || len > T - used))
        rc = write_pad(w, T - used, err, sizeof err);
    if (row)
        *row = (nnt_tok_writer_count(w->w) + (uint64_t)T - 1) / (uint64_t)T;
    uint8_t first = 0;   /* its first token is no target: nothing of it comes before it */
    if (rc == 0 && w->o.pack)
        rc = nnt_tok_writer_mark_start(w->w, err, sizeof err);
    if (rc == 0)
        rc = nnt_tok_writer_write_masked(w->w, ids, &first, 1, err, sizeof err);
    if (rc == 0 && len > 1)
        rc = nnt_tok_writer_write_masked(w->w, ids + 1, counts ? counts + 1 : NULL,
                                         (size_t)len - 1, err, sizeof err);
    return rc ? nnt_fail(ec, rc, "%s: %s", fn, err) : NNT_OK;
}

int nnt_token_writer_write_example(nnt_token_writer *w, const int32_t *ids,
                                   const uint8_t *counts, size_t n)
{
    static const char fn[] = "nnt_token_writer_write_example";
    if (!w)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: writer is NULL", fn);
    NNT_TRY(no_row_values(w, fn));
    return write_example(w, fn, ids, counts, n, NULL);
}

int nnt_token_writer_write_example_values(nnt_token_writer *w, const int32_t *ids,
                                          const uint8_t *counts, size_t n, const float *values)
{
    static const char fn[] = "nnt_token_writer_write_example_values";
    if (!w)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: writer is NULL", fn);
    nnt_ctx *ec = err_ctx(w->ctx);
    int64_t k = w->o.row_values;
    if (!k || !values || n == 0)
        return nnt_fail(ec, NNT_E_INVAL, "%s: %s", fn, !k ? "the writer was opened without "
                        "the row_values option" : !values ? "values is NULL"
                                                          : "an example of no token");
    for (int64_t i = 0; i < k; i++)   /* refused whole, before anything is written */
        if (!isfinite(values[i]))
            return nnt_fail(ec, NNT_E_INVAL, "%s: value %lld is %g (finite values)", fn,
                            (long long)i, (double)values[i]);
    uint64_t row = 0;
    NNT_TRY(write_example(w, fn, ids, counts, n, &row));
    char err[NNT_IO_ERRLEN];
    int rc = nnt_tok_writer_row_values(w->w, row, values, err, sizeof err);
    return rc ? nnt_fail(ec, rc, "%s: %s", fn, err) : NNT_OK;
}

int nnt_token_writer_count(const nnt_token_writer *w, int64_t *n)
{
    if (!w || !n)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_token_writer_count: %s is NULL",
                        w ? "n" : "writer");
    *n = (int64_t)nnt_tok_writer_count(w->w);
    return NNT_OK;
}

int nnt_token_writer_close(nnt_token_writer *w)
{
    if (!w)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_token_writer_close: writer is NULL");
    nnt_ctx *ec = err_ctx(w->ctx);
    char err[NNT_IO_ERRLEN];
    int rc = 0;
    int64_t used = w->o.block ? (int64_t)(nnt_tok_writer_count(w->w) % (uint64_t)w->o.block) : 0;
    if (used > 0 && w->o.mask && (rc = write_pad(w, w->o.block - used, err, sizeof err)) != 0) {
        nnt_tok_writer_abort(w->w);
        free(w);
        return nnt_fail(ec, rc, "nnt_token_writer_close: %s", err);
    }
    rc = nnt_tok_writer_finish(w->w, err, sizeof err);
    free(w);
    return rc ? nnt_fail(ec, rc, "nnt_token_writer_close: %s", err) : NNT_OK;
}

void nnt_token_writer_destroy(nnt_token_writer *w)
{
    if (!w)
        return;
    nnt_tok_writer_abort(w->w);
    free(w);
}
