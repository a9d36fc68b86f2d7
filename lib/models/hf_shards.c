/* SPDX-License-Identifier: MIT */
/* Sharded Hugging Face checkpoints (see hf_shards.h): the index read into a sorted table of
 * (tensor name, file), every shard opened and cross-checked against it; and for saving the
 * split into shards, the index, and the removal of an earlier save's files. */
#include "hf_shards.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_BYTES 4096
#define SHARD_NAME_MAX 255   /* longest shard file name accepted                          */

typedef struct hf_ref {
    char *name;              /* tensor name                                               */
    size_t file;             /* index into files                                          */
} hf_ref;

struct nnt_hf_weights {
    nnt_st_reader **readers; /* one per file                                              */
    char **paths;            /* each file's path (for messages)                           */
    size_t nfiles;
    hf_ref *refs;            /* sorted by name                                            */
    size_t nrefs, cap;
    char *index;             /* the index's path; NULL for a single file                 */
};

/* ---- the table -------------------------------------------------------------------------- */

void nnt_hf_weights_close(nnt_hf_weights *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nfiles; i++) {
        nnt_st_close(w->readers[i]);
        free(w->paths[i]);
    }
    for (size_t i = 0; i < w->nrefs; i++)
        free(w->refs[i].name);
    free(w->readers);
    free(w->paths);
    free(w->refs);
    free(w->index);
    free(w);
}

size_t nnt_hf_weights_count(const nnt_hf_weights *w)
{
    return w->nrefs;
}

size_t nnt_hf_weights_files(const nnt_hf_weights *w)
{
    return w->nfiles;
}

const char *nnt_hf_weights_source(const nnt_hf_weights *w)
{
    return w->index ? w->index : w->paths[0];
}

const char *nnt_hf_weights_name(const nnt_hf_weights *w, size_t i)
{
    return i < w->nrefs ? w->refs[i].name : NULL;
}

static int ref_cmp(const void *a, const void *b)
{
    return strcmp(((const hf_ref *)a)->name, ((const hf_ref *)b)->name);
}

static const hf_ref *find_ref(const nnt_hf_weights *w, const char *name)
{
    hf_ref key = {(char *)name, 0};
    return bsearch(&key, w->refs, w->nrefs, sizeof *w->refs, ref_cmp);
}

const nnt_st_entry *nnt_hf_weights_find(const nnt_hf_weights *w, const char *name,
                                        const nnt_st_reader **r, const char **path)
{
    const hf_ref *ref = find_ref(w, name);
    if (!ref)
        return NULL;
    if (r)
        *r = w->readers[ref->file];
    if (path)
        *path = w->paths[ref->file];
    return nnt_st_find(w->readers[ref->file], name);
}

/* name (owned by the table from now on, freed on failure) in file. */
static int add_ref(nnt_hf_weights *w, char *name, size_t file)
{
    if (w->nrefs == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 256;
        hf_ref *r = realloc(w->refs, cap * sizeof *r);
        if (!r) {
            free(name);
            return NNT_E_NOMEM;
        }
        w->refs = r;
        w->cap = cap;
    }
    w->refs[w->nrefs].name = name;
    w->refs[w->nrefs].file = file;
    w->nrefs++;
    return NNT_OK;
}

/* A file of the set (path copied; reader NULL until opened). Its index in *file. */
static int add_file(nnt_hf_weights *w, const char *path, size_t *file)
{
    nnt_st_reader **r = realloc(w->readers, (w->nfiles + 1) * sizeof *r);
    if (r)
        w->readers = r;
    char **p = r ? realloc(w->paths, (w->nfiles + 1) * sizeof *p) : NULL;
    if (p)
        w->paths = p;
    char *copy = p ? strdup(path) : NULL;
    if (!copy)
        return NNT_E_NOMEM;
    w->readers[w->nfiles] = NULL;
    w->paths[w->nfiles] = copy;
    *file = w->nfiles++;
    return NNT_OK;
}

static nnt_hf_weights *weights_new(void)
{
    return calloc(1, sizeof(nnt_hf_weights));
}

static int oom(nnt_ctx *ctx, const char *fn)
{
    return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
}

int nnt_hf_weights_open_file(nnt_ctx *ctx, const char *fn, const char *path,
                             nnt_hf_weights **out)
{
    char err[NNT_IO_ERRLEN];
    size_t file = 0;
    nnt_hf_weights *w = weights_new();
    *out = NULL;
    if (!w || add_file(w, path, &file)) {
        nnt_hf_weights_close(w);
        return oom(ctx, fn);
    }
    int rc = nnt_st_open(path, &w->readers[0], err, sizeof err);
    if (rc) {
        nnt_hf_weights_close(w);
        return nnt_fail(ctx, rc, "%s: %s", fn, err);
    }
    for (size_t i = 0; i < nnt_st_count(w->readers[0]) && rc == 0; i++) {
        char *name = strdup(nnt_st_entry_at(w->readers[0], i)->name);
        rc = name ? add_ref(w, name, 0) : NNT_E_NOMEM;
    }
    if (rc) {
        nnt_hf_weights_close(w);
        return oom(ctx, fn);
    }
    qsort(w->refs, w->nrefs, sizeof *w->refs, ref_cmp);   /* names unique in a file */
    *out = w;
    return NNT_OK;
}

/* ---- the index ------------------------------------------------------------------------- */

/* Reading an index: the JSON reader over its text, the table being filled, the directory. */
typedef struct index_read {
    nnt_json j;
    nnt_hf_weights *w;
    const char *dir;
    char err[NNT_IO_ERRLEN];
} index_read;

/* A plain file name of the directory: no separator, no "..", not empty. */
static int bad_shard_name(const char *s)
{
    return !*s || strchr(s, '/') || strchr(s, '\\') || strstr(s, "..");
}

/* The file called shard (a new one, or one named before) for tensor `name`. */
static int shard_file(index_read *x, const char *name, const char *shard, size_t *file)
{
    if (bad_shard_name(shard))
        return nnt_json_fail(&x->j, "weight_map[\"%s\"]: shard name \"%s\" is not a file name "
                             "of the index's directory (empty, '/', '\\' or \"..\")", name,
                             shard);
    char path[PATH_BYTES];
    int n = snprintf(path, sizeof path, "%s/%s", x->dir, shard);
    if (n < 0 || (size_t)n >= sizeof path)
        return nnt_json_fail(&x->j, "weight_map[\"%s\"]: path %s/%s is too long", name,
                             x->dir, shard);
    for (size_t i = 0; i < x->w->nfiles; i++)
        if (strcmp(x->w->paths[i], path) == 0) {
            *file = i;
            return NNT_OK;
        }
    if (add_file(x->w, path, file))
        return nnt_io_errf(x->err, sizeof x->err, NNT_E_NOMEM, "out of memory");
    return NNT_OK;
}

/* One "tensor": "shard" member of weight_map. */
static int map_member(index_read *x)
{
    char *name = NULL, *shard = NULL;
    size_t file = 0;
    NNT_TRY(nnt_json_string(&x->j, &name, NULL, NNT_IO_MAXNAME, 0, "(a tensor name)"));
    int rc = nnt_json_expect(&x->j, ':', "after a tensor name");
    if (rc == 0 && nnt_json_peek(&x->j) != '"')
        rc = nnt_json_fail(&x->j, "weight_map[\"%s\"] must be a string (a shard file name)",
                           name);
    if (rc == 0)
        rc = nnt_json_string(&x->j, &shard, NULL, SHARD_NAME_MAX, 0, name);
    if (rc == 0)
        rc = shard_file(x, name, shard, &file);
    free(shard);
    if (rc) {
        free(name);
        return rc;
    }
    if (add_ref(x->w, name, file))
        return nnt_io_errf(x->err, sizeof x->err, NNT_E_NOMEM, "out of memory");
    return NNT_OK;
}

/* The weight_map object: every member, then sorted and checked for duplicates. */
static int weight_map(index_read *x)
{
    NNT_TRY(nnt_json_expect(&x->j, '{', "(weight_map must be an object)"));
    if (nnt_json_peek(&x->j) == '}')
        return nnt_json_fail(&x->j, "weight_map is empty");
    for (;;) {
        NNT_TRY(map_member(x));
        if (nnt_json_peek(&x->j) == '}') {
            x->j.pos++;
            break;
        }
        NNT_TRY(nnt_json_expect(&x->j, ',', "or '}' after a weight_map value"));
    }
    nnt_hf_weights *w = x->w;
    qsort(w->refs, w->nrefs, sizeof *w->refs, ref_cmp);
    for (size_t i = 1; i < w->nrefs; i++)
        if (strcmp(w->refs[i - 1].name, w->refs[i].name) == 0)
            return nnt_io_errf(x->err, sizeof x->err, NNT_E_FORMAT, "%s: weight_map: duplicate "
                               "key \"%s\"", w->index, w->refs[i].name);
    return NNT_OK;
}

/* The top-level object: weight_map (required, once), metadata (an object or null, once),
 * anything else skipped. */
static int index_object(index_read *x)
{
    int seen_map = 0, seen_meta = 0;
    NNT_TRY(nnt_json_expect(&x->j, '{', "(the index must be an object)"));
    for (int c = nnt_json_peek(&x->j); c != '}';) {   /* members, ',' between them */
        char *key = NULL;
        NNT_TRY(nnt_json_string(&x->j, &key, NULL, NNT_IO_MAXNAME, 0, "(a key)"));
        int is_map = strcmp(key, "weight_map") == 0, is_meta = strcmp(key, "metadata") == 0;
        free(key);
        if ((is_map && seen_map) || (is_meta && seen_meta))
            return nnt_json_fail(&x->j, "duplicate key \"%s\"", is_map ? "weight_map"
                                                                     : "metadata");
        NNT_TRY(nnt_json_expect(&x->j, ':', "after a key"));
        c = nnt_json_peek(&x->j);
        if (is_meta && c != '{' && c != 'n')
            return nnt_json_fail(&x->j, "metadata must be an object or null");
        if (is_map)
            NNT_TRY(weight_map(x));
        else
            NNT_TRY(nnt_json_skip(&x->j, NNT_JSON_MAXDEPTH, is_meta ? "metadata" : "a value"));
        seen_map |= is_map;
        seen_meta |= is_meta;
        if ((c = nnt_json_peek(&x->j)) != '}')
            NNT_TRY(nnt_json_expect(&x->j, ',', "or '}' after a value"));
    }
    x->j.pos++;
    NNT_TRY(nnt_json_end(&x->j));
    if (!seen_map)
        return nnt_io_errf(x->err, sizeof x->err, NNT_E_FORMAT, "%s: no key weight_map",
                           x->w->index);
    return NNT_OK;
}

/* The whole of path, NUL-terminated. */
static int slurp(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
    int fd = -1;
    uint64_t size = 0;
    *out = NULL;
    NNT_TRY(nnt_io_open_read(path, &fd, &size, err, errlen));
    int rc = NNT_OK;
    if (size > NNT_HF_INDEX_MAX_BYTES)
        rc = nnt_io_errf(err, errlen, NNT_E_FORMAT, "%s: larger than %u bytes", path,
                         NNT_HF_INDEX_MAX_BYTES);
    char *buf = rc ? NULL : malloc((size_t)size + 1);
    if (rc == 0 && !buf)
        rc = nnt_io_errf(err, errlen, NNT_E_NOMEM, "out of memory");
    if (rc == 0)
        rc = nnt_io_pread(fd, buf, (size_t)size, 0, path, err, errlen);
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[size] = '\0';
    *out = buf;
    *len = (size_t)size;
    return NNT_OK;
}

/* Every shard open; a failure names the index and a tensor mapped to the shard. */
static int open_shards(nnt_ctx *ctx, const char *fn, nnt_hf_weights *w)
{
    char err[NNT_IO_ERRLEN];
    for (size_t f = 0; f < w->nfiles; f++) {
        int rc = nnt_st_open(w->paths[f], &w->readers[f], err, sizeof err);
        if (rc == 0)
            continue;
        const char *key = "";
        for (size_t i = 0; i < w->nrefs && !*key; i++)
            if (w->refs[i].file == f)
                key = w->refs[i].name;
        return nnt_fail(ctx, rc, "%s: %s: weight_map[\"%s\"]: shard %s: %s", fn, w->index, key,
                        strrchr(w->paths[f], '/') + 1, err);
    }
    return NNT_OK;
}

/* Every tensor of the map is in its shard; every tensor of a shard is mapped to it. */
static int cross_check(nnt_ctx *ctx, const char *fn, const nnt_hf_weights *w)
{
    for (size_t i = 0; i < w->nrefs; i++) {
        const hf_ref *r = &w->refs[i];
        if (!nnt_st_find(w->readers[r->file], r->name))
            return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: weight_map[\"%s\"] is %s, which holds "
                            "no tensor %s", fn, w->index, r->name,
                            strrchr(w->paths[r->file], '/') + 1, r->name);
    }
    for (size_t f = 0; f < w->nfiles; f++)
        for (size_t k = 0; k < nnt_st_count(w->readers[f]); k++) {
            const char *name = nnt_st_entry_at(w->readers[f], k)->name;
            const hf_ref *r = find_ref(w, name);
            if (!r)
                return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: tensor %s is not in the "
                                "weight_map of %s", fn, w->paths[f], name, w->index);
            if (r->file != f)
                return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: tensor %s is also in %s, where "
                                "weight_map[\"%s\"] puts it (a tensor in two shards)", fn,
                                w->paths[f], name, w->paths[r->file], name);
        }
    return NNT_OK;
}

/* The index at w->index parsed into w (files named, not opened). */
static int read_index(nnt_ctx *ctx, const char *fn, const char *dir, nnt_hf_weights *w)
{
    index_read x;
    char *buf = NULL;
    size_t len = 0;
    x.w = w;
    x.dir = dir;
    int rc = slurp(w->index, &buf, &len, x.err, sizeof x.err);
    if (rc == 0) {
        nnt_json_init(&x.j, buf, len, 0, w->index, x.err, sizeof x.err);
        rc = index_object(&x);
    }
    free(buf);
    return rc ? nnt_fail(ctx, rc, "%s: %s", fn, x.err) : NNT_OK;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int nnt_hf_weights_open(nnt_ctx *ctx, const char *fn, const char *dir, nnt_hf_weights **out)
{
    char single[PATH_BYTES], index[PATH_BYTES];
    int a = snprintf(single, sizeof single, "%s/" NNT_HF_SINGLE, dir);
    int b = snprintf(index, sizeof index, "%s/" NNT_HF_INDEX, dir);
    *out = NULL;
    if (a < 0 || b < 0 || (size_t)b >= sizeof index)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: path %s/%s is too long", fn, dir, NNT_HF_INDEX);
    if (exists(single) || !exists(index))
        return nnt_hf_weights_open_file(ctx, fn, single, out);
    nnt_hf_weights *w = weights_new();
    if (!w || !(w->index = strdup(index))) {
        free(w);
        return oom(ctx, fn);
    }
    int rc = read_index(ctx, fn, dir, w);
    if (rc == 0)
        rc = open_shards(ctx, fn, w);
    if (rc == 0)
        rc = cross_check(ctx, fn, w);
    if (rc) {
        nnt_hf_weights_close(w);
        return rc;
    }
    *out = w;
    return NNT_OK;
}

/* ---- saving ----------------------------------------------------------------------------- */

void nnt_hf_plan_free(nnt_hf_plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->names[i]);
    free(p->names);
    free(p->bytes);
    free(p->shard);
    memset(p, 0, sizeof *p);
}

int nnt_hf_plan_add(nnt_hf_plan *p, const char *name, uint64_t numel, uint64_t bytes,
                    char *err, size_t errlen)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        char **names = realloc(p->names, cap * sizeof *names);
        if (names)
            p->names = names;
        uint64_t *b = names ? realloc(p->bytes, cap * sizeof *b) : NULL;
        if (b)
            p->bytes = b;
        int *s = b ? realloc(p->shard, cap * sizeof *s) : NULL;
        if (!s)
            return nnt_io_errf(err, errlen, NNT_E_NOMEM, "out of memory");
        p->shard = s;
        p->cap = cap;
    }
    if (!(p->names[p->n] = strdup(name)))
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "out of memory");
    p->bytes[p->n] = bytes;
    p->shard[p->n] = 0;
    p->total += bytes;
    p->elements += numel;
    p->n++;
    return NNT_OK;
}

int nnt_hf_plan_split(nnt_hf_plan *p, uint64_t max_bytes, char *err, size_t errlen)
{
    int k = 0;
    uint64_t used = 0;   /* bytes in shard k */
    for (size_t i = 0; i < p->n; i++) {
        if (max_bytes && used > 0 && used + p->bytes[i] > max_bytes) {
            k++;
            used = 0;
        }
        p->shard[i] = k;
        used += p->bytes[i];
    }
    p->nshards = k + 1;
    if (p->nshards > NNT_HF_MAX_SHARDS)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "%d shards of at most %llu bytes: more "
                           "than %d", p->nshards, (unsigned long long)max_bytes,
                           NNT_HF_MAX_SHARDS);
    return NNT_OK;
}

void nnt_hf_shard_name(int k, int n, char *name, size_t size)
{
    snprintf(name, size, "model-%05d-of-%05d.safetensors", k + 1, n);
}

/* s as a JSON string (quotes, escapes) appended to o. */
static int put_json_string(nnt_io_out *o, const char *s, char *err, size_t errlen)
{
    char buf[8];
    NNT_TRY(nnt_io_out_write(o, "\"", 1, err, errlen));
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        size_t n = 1;
        buf[0] = (char)*c;
        if (*c == '"' || *c == '\\') {
            buf[0] = '\\';
            buf[1] = (char)*c;
            n = 2;
        } else if (*c < 0x20) {
            n = (size_t)snprintf(buf, sizeof buf, "\\u%04x", *c);
        }
        NNT_TRY(nnt_io_out_write(o, buf, n, err, errlen));
    }
    return nnt_io_out_write(o, "\"", 1, err, errlen);
}

/* The index text: metadata, then the weight_map with the names in order. */
static int index_text(nnt_io_out *o, const nnt_hf_plan *p, const hf_ref *order, char *err,
                      size_t errlen)
{
    char line[160], shard[64];
    snprintf(line, sizeof line, "{\n  \"metadata\": {\n    \"total_parameters\": %llu,\n    "
             "\"total_size\": %llu\n  },\n  \"weight_map\": {",
             (unsigned long long)p->elements, (unsigned long long)p->total);
    NNT_TRY(nnt_io_out_write(o, line, strlen(line), err, errlen));
    for (size_t i = 0; i < p->n; i++) {
        NNT_TRY(nnt_io_out_write(o, i ? ",\n    " : "\n    ", i ? 6 : 5, err, errlen));
        NNT_TRY(put_json_string(o, order[i].name, err, errlen));
        nnt_hf_shard_name((int)order[i].file, p->nshards, shard, sizeof shard);
        snprintf(line, sizeof line, ": \"%s\"", shard);
        NNT_TRY(nnt_io_out_write(o, line, strlen(line), err, errlen));
    }
    return nnt_io_out_write(o, "\n  }\n}\n", 7, err, errlen);
}

int nnt_hf_index_write(const nnt_hf_plan *p, const char *path, char *err, size_t errlen)
{
    hf_ref *order = malloc((p->n + 1) * sizeof *order);   /* (name, shard) by name */
    if (!order)
        return nnt_io_errf(err, errlen, NNT_E_NOMEM, "out of memory");
    for (size_t i = 0; i < p->n; i++) {
        order[i].name = p->names[i];
        order[i].file = (size_t)p->shard[i];
    }
    qsort(order, p->n, sizeof *order, ref_cmp);
    nnt_io_out *o = NULL;
    int rc = nnt_io_out_begin(path, &o, err, errlen);
    if (rc == 0)
        rc = index_text(o, p, order, err, errlen);
    if (rc == 0) {
        rc = nnt_io_out_commit(o, err, errlen);   /* frees o */
        o = NULL;
    }
    nnt_io_out_abort(o);
    free(order);
    return rc;
}

/* The count M of a name "model-NNNNN-of-MMMMM.safetensors" (5 digits each), else -1. */
static int shard_count_of(const char *name)
{
    static const char pat[] = "model-#####-of-#####.safetensors";
    int count = 0;
    if (strlen(name) != sizeof pat - 1)
        return -1;
    for (size_t i = 0; pat[i]; i++) {
        if (pat[i] != '#' && name[i] != pat[i])
            return -1;
        if (pat[i] == '#' && (name[i] < '0' || name[i] > '9'))
            return -1;
        if (pat[i] == '#' && i > 14)
            count = 10 * count + (name[i] - '0');
    }
    return count;
}

static int sync_dir(const char *dir, char *err, size_t errlen)
{
    int fd = open(dir, O_RDONLY);
    if (fd < 0)
        return nnt_io_errf(err, errlen, NNT_E_IO, "%s: cannot open: %s", dir, strerror(errno));
    int rc = fsync(fd) != 0 && errno != EINVAL
                 ? nnt_io_errf(err, errlen, NNT_E_IO, "%s: fsync: %s", dir, strerror(errno))
                 : NNT_OK;
    close(fd);
    return rc;
}

/* Remove dir/name; absent is fine. */
static int remove_file(const char *dir, const char *name, char *err, size_t errlen)
{
    char path[PATH_BYTES];
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof path)
        return nnt_io_errf(err, errlen, NNT_E_INVAL, "path %s/%s is too long", dir, name);
    if (!nnt_io_writes())
        return NNT_OK;   /* rank > 0 of an MPI job: rank 0 removes it */
    if (unlink(path) != 0 && errno != ENOENT)
        return nnt_io_errf(err, errlen, NNT_E_IO, "cannot remove %s: %s", path,
                           strerror(errno));
    return NNT_OK;
}

int nnt_hf_remove_index(const char *dir, char *err, size_t errlen)
{
    NNT_TRY(remove_file(dir, NNT_HF_INDEX, err, errlen));
    return sync_dir(dir, err, errlen);
}

int nnt_hf_remove_stale(const char *dir, int nshards, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d)
        return nnt_io_errf(err, errlen, NNT_E_IO, "%s: cannot list: %s", dir, strerror(errno));
    int rc = NNT_OK;
    struct dirent *e;
    /* unlinking while listing is allowed: an entry removed is either seen or not */
    while (rc == 0 && (e = readdir(d)) != NULL) {
        int count = shard_count_of(e->d_name);
        if (count >= 0 && count != nshards)
            rc = remove_file(dir, e->d_name, err, errlen);
    }
    closedir(d);
    if (rc == 0)
        rc = remove_file(dir, nshards ? NNT_HF_SINGLE : NNT_HF_INDEX, err, errlen);
    return rc ? rc : sync_dir(dir, err, errlen);
}

NNT_API int nnt_hf_size_parse(const char *text, uint64_t *bytes)
{
    static const struct { const char *unit; uint64_t mult; } units[] = {
        {"", 1}, {"b", 1}, {"kb", 1000}, {"mb", 1000000}, {"gb", 1000000000},
        {"tb", 1000000000000ULL}, {"kib", 1ULL << 10}, {"mib", 1ULL << 20},
        {"gib", 1ULL << 30}, {"tib", 1ULL << 40}};
    const char *fn = "nnt_hf_size_parse";
    char *end;
    if (!text || !bytes)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: text or bytes is NULL", fn);
    errno = 0;
    unsigned long long v = *text >= '0' && *text <= '9' ? strtoull(text, &end, 10) : 0;
    for (size_t i = 0; v && !errno && i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].unit), k = 0;
        while (k < n && (end[k] | 0x20) == units[i].unit[k])
            k++;
        if (k == n && !end[n] && v <= UINT64_MAX / units[i].mult)
            return *bytes = v * units[i].mult, NNT_OK;
    }
    return nnt_fail(NULL, NNT_E_INVAL, "%s: '%s' is not a size (a positive integer and B, KB, "
                    "MB, GB, TB, KiB, MiB, GiB or TiB, any case, e.g. 2GB)", fn, text);
}
