/* SPDX-License-Identifier: MIT */
/* nnt_token_writer: the public streaming writer of llm.c token files (what nnt_data_open reads
 * as NNT_DATA_LLMC), over lib/io's nnt_tok_writer: 16-bit ids (magic 20240520, version 1) or
 * 32-bit ids (llm.c's Llama 3 header, magic 20240801, version 7), the count put in the header
 * at close, the file put in place atomically (temporary file, fsync, rename).
 * Failures are recorded in the writer's context when it was given one and is still live, else
 * as the calling thread's last error (nnt_ctx_last_error(NULL)). */
#include "../internal.h"
#include "../io/io.h"

#include <stdlib.h>

struct nnt_token_writer {
    nnt_ctx *ctx;                  /* for messages; may be NULL or destroyed since          */
    nnt_tok_writer *w;
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
    int rc = nnt_read_options(fn, opts, &defaults, &o, sizeof o, 0,
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
    nnt_token_writer *tw = calloc(1, sizeof *tw);
    if (!tw)
        return nnt_fail(ec, NNT_E_NOMEM, "%s: out of host memory", fn);
    char err[NNT_IO_ERRLEN];
    rc = nnt_tok_writer_begin(path, o.bits == 32 ? NNT_TOK_LLMC32 : NNT_TOK_LLMC, o.vocab,
                              &tw->w, err, sizeof err);
    if (rc) {
        free(tw);
        return nnt_fail(ec, rc, "%s: %s", fn, err);
    }
    tw->ctx = ctx;
    *out = tw;
    return NNT_OK;
}

int nnt_token_writer_write(nnt_token_writer *w, const int32_t *ids, size_t n)
{
    static const char fn[] = "nnt_token_writer_write";
    if (!w)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: writer is NULL", fn);
    nnt_ctx *ec = err_ctx(w->ctx);
    if (!ids && n)
        return nnt_fail(ec, NNT_E_INVAL, "%s: ids is NULL", fn);
    char err[NNT_IO_ERRLEN];
    int rc = nnt_tok_writer_write(w->w, ids, n, err, sizeof err);
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
    int rc = nnt_tok_writer_finish(w->w, err, sizeof err);
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
