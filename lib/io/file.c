/* SPDX-License-Identifier: MIT */
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
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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
int nnt_io_make_dirs(const char *path)
{
    char *p = path && *path ? strdup(path) : NULL;
    if (!p)
        return errno = path && *path ? ENOMEM : ENOENT, -1;
    for (char *s = p + 1;; s++) {
        char c = *s;
        if (c != '/' && c != '\0')
            continue;
        *s = '\0';
        if (mkdir(p, 0777) && errno != EEXIST)
            return free(p), -1;
        *s = c;
        if (!c)
            break;
    }
    free(p);
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
}

static void (*io_note)(const char *msg);   /* see nnt_io_set_note */

void nnt_io_set_note(void (*note)(const char *msg))
{
    io_note = note;
}

void nnt_io_set_writer(int writes)
{
    __atomic_store_n(&io_writer, writes ? 1 : 0, __ATOMIC_SEQ_CST);
}

int nnt_io_writes(void)
{
    return __atomic_load_n(&io_writer, __ATOMIC_SEQ_CST);
}

/* The bytes free to an unprivileged writer on the file system of fd (0 if unknown). */
static uint64_t free_bytes(int fd)
{
    struct statvfs v;
    return fstatvfs(fd, &v) == 0 ? (uint64_t)v.f_bavail * (uint64_t)v.f_frsize : 0;
}

/* A write that failed (e: errno, 0 for a short write) after written bytes of the file: the
 * message names the file being replaced, which is left as it was. */
static int write_failed(const nnt_io_out *o, int e, uint64_t written, char *err, size_t errlen)
{
    if (e == ENOSPC || e == EDQUOT)
        return nnt_io_errf(err, errlen, NNT_E_IO, "%s: the file system is full (%s) after "
                           "%llu bytes of the new file, %llu bytes free; %s is unchanged",
                           o->path, strerror(e), (unsigned long long)written,
                           (unsigned long long)free_bytes(o->fd), o->path);
    return nnt_io_errf(err, errlen, NNT_E_IO, "%s: write error after %llu bytes of the new file "
                       "(%s): %s; %s is unchanged", o->path, (unsigned long long)written, o->tmp,
                       e ? strerror(e) : "nothing written", o->path);
}

static int write_all(nnt_io_out *o, const void *buf, size_t n, char *err, size_t errlen)
{
    const unsigned char *p = buf;
    if (o->discard)
        return 0;   /* a rank that does not write: the bytes are dropped */
    uint64_t written = o->size - o->used;   /* on disk before this call */
    while (n > 0) {
        size_t chunk = n > (size_t)1 << 30 ? (size_t)1 << 30 : n;
        ssize_t put = write(o->fd, p, chunk);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0)
            return write_failed(o, put < 0 ? errno : 0, written, err, errlen);
        p += put;
        n -= (size_t)put;
        written += (uint64_t)put;
    }
    return 0;
}

/* Whether name is path's temporary name: "<base>.tmp-" and six characters of mkstemp's. */
static int is_temp_of(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp-", 5) != 0 ||
        strlen(name + n + 5) != 6)
        return 0;
    for (const char *c = name + n + 5; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
            return 0;
    return 1;
}

/* Remove the temporary files that earlier saves into path left (killed, or stopped by a
 * failure that could not remove them): files of path's own temporary pattern only, and only
 * those no live save holds (each save keeps an exclusive lock on its temporary file). Says
 * what it removed through the note hook. */
static void remove_stale_temps(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[4096] = ".";
    if (slash == path) {
        strcpy(dir, "/");
    } else if (slash) {
        size_t dlen = (size_t)(slash - path);
        if (dlen >= sizeof dir)
            return;
        memcpy(dir, path, dlen);
        dir[dlen] = '\0';
    }
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_temp_of(e->d_name, base))
            continue;
        char full[4096 + 256];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        int fd = open(full, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        if (fd < 0)
            continue;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            unlink(full) == 0 && io_note) {
            char msg[4096 + 512];
            snprintf(msg, sizeof msg, "removed %s (%llu bytes), the temporary file of an earlier "
                     "save of %s that did not finish", full, (unsigned long long)st.st_size,
                     path);
            io_note(msg);
        }
        close(fd);
    }
    closedir(d);
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
    remove_stale_temps(path);
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
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        /* not fatal: only another save's cleaning could then take the file for a stale one */
    }
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
            return write_failed(o, put < 0 ? errno : 0, o->size, err, errlen);
        p += put;
        off += (uint64_t)put;
        n -= (size_t)put;
    }
    return 0;
}

int nnt_io_out_reserve(nnt_io_out *o, uint64_t total, char *err, size_t errlen)
{
    if (o->discard || total <= o->size)
        return 0;
    int e = posix_fallocate(o->fd, 0, (off_t)total);
    if (e == 0 || (e != ENOSPC && e != EDQUOT))
        return 0;   /* allocated, or the file system cannot say in advance: writes will */
    uint64_t avail = free_bytes(o->fd);
    return nnt_io_errf(err, errlen, NNT_E_IO, "%s: the file system is full: the new file needs "
                       "%llu bytes, %llu are free (%s); %s is unchanged", o->path,
                       (unsigned long long)total, (unsigned long long)avail, strerror(e),
                       o->path);
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
