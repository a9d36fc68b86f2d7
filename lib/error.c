/* SPDX-License-Identifier: MIT */
/* Status codes, their names, and the last-error messages (per context, per thread). */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* Last failure in this thread, whatever the context (or none). */
static __thread char thread_errmsg[NNT_ERRMSG_MAX];

const char *nnt_strerror(int status)
{
    switch (status) {
    case NNT_OK: return "success";
    case NNT_E_INVAL: return "invalid argument";
    case NNT_E_NOMEM: return "out of memory";
    case NNT_E_IO: return "input/output error";
    case NNT_E_FORMAT: return "malformed or truncated file";
    case NNT_E_SHAPE: return "shape, tiling or dtype mismatch";
    case NNT_E_UNSUPPORTED: return "not supported";
    case NNT_E_RUNTIME: return "runtime failure";
    case NNT_E_BUSY: return "resource busy";
    case NNT_E_STATE: return "object in the wrong state";
    default: return "unknown status code";
    }
}

int nnt_fail(const nnt_ctx *ctx, int status, const char *fmt, ...)
{
    /* Format into a scratch buffer first: an argument may be the message of an earlier
     * failure (nnt_ctx_last_error returns thread_errmsg), and vsnprintf must not write
     * into the buffer it reads. */
    char msg[NNT_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(thread_errmsg, msg, sizeof thread_errmsg);
    if (ctx) {
        nnt_ctx *mut = (nnt_ctx *)ctx;   /* the message buffer is not part of its value */
        pthread_mutex_lock(&mut->lock);
        memcpy(mut->errmsg, thread_errmsg, sizeof mut->errmsg);
        pthread_mutex_unlock(&mut->lock);
    }
    nnt_log(NNT_LOG_DEBUG, "%s (%s)", thread_errmsg, nnt_strerror(status));
    return status;
}

int nnt_check_struct_sizes(const nnt_ctx *ctx, const char *fn, const char *what, size_t have,
                           size_t want, const size_t *older, size_t nolder, const char *how)
{
    for (size_t i = 0; i < nolder; i++)
        if (older[i] != 0 && have == older[i])
            return NNT_OK;
    if (have < want)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s %zu is smaller than %zu; %s", fn, what, have,
                        want, how);
    if (have > want)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: %s %zu: the program was built against a "
                        "newer nnt than the library (%s)", fn, what, have, PACKAGE_VERSION);
    return NNT_OK;
}

int nnt_check_struct_size(const nnt_ctx *ctx, const char *fn, const char *what, size_t have,
                          size_t want, size_t want_v02, const char *how)
{
    return nnt_check_struct_sizes(ctx, fn, what, have, want, &want_v02, 1, how);
}

int nnt_check_reserved(const nnt_ctx *ctx, const char *fn, const char *what,
                       const uint64_t *reserved, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (reserved[i] != 0)
            return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: %s[%zu] is 0x%llx, not 0: a field "
                            "of a newer nnt than the library (%s), or a structure not "
                            "initialised by its init macro", fn, what, i,
                            (unsigned long long)reserved[i], PACKAGE_VERSION);
    return NNT_OK;
}

int nnt_read_options_sizes(const char *fn, const void *user, const void *defaults, void *out,
                           size_t size, const size_t *older, size_t nolder, const char *how)
{
    memcpy(out, defaults, size);
    if (!user)
        return NNT_OK;
    size_t have;
    memcpy(&have, user, sizeof have);
    NNT_TRY(nnt_check_struct_sizes(NULL, fn, "options size", have, size, older, nolder, how));
    memcpy(out, user, have);   /* the fields the caller knows; the rest keep the defaults */
    memcpy(out, &size, sizeof size);
    return NNT_OK;
}

int nnt_read_options(const char *fn, const void *user, const void *defaults, void *out,
                     size_t size, size_t size_v02, const char *how)
{
    return nnt_read_options_sizes(fn, user, defaults, out, size, &size_v02, 1, how);
}

const char *nnt_ctx_last_error(const nnt_ctx *ctx)
{
    if (ctx && nnt_ctx_check(ctx, NULL) == 0) {
        nnt_ctx *mut = (nnt_ctx *)ctx;
        pthread_mutex_lock(&mut->lock);
        memcpy(thread_errmsg, mut->errmsg, sizeof thread_errmsg);
        pthread_mutex_unlock(&mut->lock);
    }
    return thread_errmsg;
}

int nnt_version(int *number, const char **string)
{
    if (!number && !string)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_version: both outputs are NULL");
    if (number)
        *number = NNT_VERSION_NUMBER;
    if (string)
        *string = PACKAGE_VERSION;
    return NNT_OK;
}
