/* The file helpers shared by lib/io: error messages, reading (open, pread), the output file
 * written through a temporary + fsync + rename (nnt_io_out), the process-wide writer flag of MPI
 * jobs, and the safetensors dtypes (names, sizes) that the other formats use too. */
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

int nnt_io_out_pwrite(nnt_io_out *o, const void *buf, size_t n, uint64_t off, char *err,
                      size_t errlen)
{
    if (off > o->size || n > o->size - off)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%s: %zu bytes at %llu are beyond the %llu "
                           "written", o->path, n, (unsigned long long)off,
                           (unsigned long long)o->size);
    if (o->discard)
        return 0;
    int rc;
    if (o->used && (rc = write_all(o, o->buf, o->used, err, errlen)) != 0)
        return rc;
    o->used = 0;
    const unsigned char *p = buf;
    while (n > 0) {
        size_t chunk = n > (size_t)1 << 30 ? (size_t)1 << 30 : n;
        ssize_t put = pwrite(o->fd, p, chunk, (off_t)off);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0)
            return nnt_io_errf(err, errlen, NNT_E_IO, "%s: write error: %s", o->tmp,
                               put < 0 ? strerror(errno) : "nothing written");
        p += put;
        off += (uint64_t)put;
        n -= (size_t)put;
    }
    return 0;
}

uint64_t nnt_io_out_size(const nnt_io_out *o) { return o->size; }
const char *nnt_io_out_path(const nnt_io_out *o) { return o->path; }

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
