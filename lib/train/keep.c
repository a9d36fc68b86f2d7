/* SPDX-License-Identifier: MIT */
/* A previous run's files kept (nnt_trainer_options.keep_previous): a second run into one
 * directory must not overwrite the first's checkpoint and logs. When the checkpoint path or
 * log_dir/checkpoint.safetensors holds another run's checkpoint (one this trainer did not
 * resume: not resume itself, nor a file in log_dir), that run's files move to the first free
 * log_dir/previous-N before this run writes any. Rank 0 only (it alone writes files). */
#include "trainer_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int exists(const char *path)
{
    struct stat st;
    return path && stat(path, &st) == 0;
}

/* Whether paths a and b name one file (both exist). */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Whether path is a file in directory dir. */
static int in_directory(const char *path, const char *dir)
{
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash)
        snprintf(d, sizeof d, ".");
    else if (slash == d)
        d[1] = '\0';
    else
        *slash = '\0';
    return same_file(d, dir);
}

/* Move path (when it exists) into dir under its base name. */
static int move_into(nnt_trainer *tr, const char *path, const char *dir)
{
    char to[8192];
    if (!exists(path))
        return NNT_OK;   /* (a name listed twice: moved already) */
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(to, sizeof to, "%s/%s", dir, base);
    if (rename(path, to))
        return nnt_fail(tr->ctx, NNT_E_IO, "keep_previous: cannot move '%s' to '%s' to keep "
                        "the previous run's files: %s", path, to, strerror(errno));
    return NNT_OK;
}

int nnt_trainer_keep_previous(nnt_trainer *tr)
{
    const nnt_trainer_options *o = &tr->o;
    static const char *const names[] = {"checkpoint.safetensors", "train.csv", "val.csv",
                                        "loss.svg"};
    size_t nl = o->log_dir ? strlen(o->log_dir) : 0;
    char *dflt = nl ? malloc(nl + 32) : NULL, *dir = malloc(nl + 32), path[4096];
    int rc = NNT_OK;
    if (!dir || (nl && !dflt)) {
        free(dflt), free(dir);
        return nnt_fail(tr->ctx, NNT_E_NOMEM, "keep_previous: out of memory");
    }
    if (dflt)
        sprintf(dflt, "%s/checkpoint.safetensors", o->log_dir);
    int other = (exists(o->checkpoint) || exists(dflt)) && o->log_dir;
    int ours = o->resume && (same_file(o->resume, o->checkpoint) ||
                             in_directory(o->resume, o->log_dir));
    if (!o->keep_previous || tr->rank != 0 || !other || ours) {
        free(dflt), free(dir);
        return NNT_OK;   /* no checkpoint of another run (nothing of value to lose), or ours */
    }
    if (nnt_io_make_dirs(o->log_dir))
        rc = nnt_fail(tr->ctx, NNT_E_IO, "keep_previous: cannot create directory %s: %s",
                      o->log_dir, strerror(errno));
    for (int n = 1; rc == NNT_OK; n++) {
        sprintf(dir, "%s/previous-%d", o->log_dir, n);
        if (mkdir(dir, 0777) == 0)
            break;
        if (errno != EEXIST || n > 100000) {
            rc = nnt_fail(tr->ctx, NNT_E_IO, "keep_previous: cannot create '%s' to keep the "
                          "previous run's files in: %s", dir, strerror(errno));
            break;
        }
    }
    for (size_t i = 0; rc == NNT_OK && i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", o->log_dir, names[i]);
        rc = move_into(tr, path, dir);
    }
    const char *own[] = {o->checkpoint, o->best_checkpoint, o->trace_table};
    for (size_t i = 0; rc == NNT_OK && i < 3; i++)
        rc = own[i] ? move_into(tr, own[i], dir) : NNT_OK;
    for (const char *p = o->keep_also; rc == NNT_OK && p && *p;) {
        size_t len = strcspn(p, ",");
        snprintf(path, sizeof path, "%s/%.*s", o->log_dir, (int)len, p);
        rc = len ? move_into(tr, path, dir) : NNT_OK;
        p += len + (p[len] == ',');
    }
    free(dflt);
    if (rc)
        free(dir);
    else
        tr->kept_previous = dir;
    return rc;
}
