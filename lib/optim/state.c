/* SPDX-License-Identifier: MIT */
/* Training state files: every parameter of an optimizer, its state tensors, its step and the
 * caller's section (data position, RNG state, options string) in one safetensors file.
 *
 * Tensors (F32, each of its parameter's shape), in this order:
 *   param.<name>                 every parameter, in the order they were added
 *   adam_m.<name>, adam_v.<name> AdamW / Adam, only when step > 0
 *   sgd_momentum.<name>          SGD with momentum > 0, only when step > 0
 * Metadata (all strings): format "nnt-train-state", format_version "1" or "2", optimizer
 * ("adamw", "adam", "sgd"), step, data_pos, rng "[a,b,c,d]", options, in version 2 model
 * (the model's configuration as the config.json text nnt_model_save_hf writes: the
 * optimizer's parameters were exactly one model's), then meta_checksum (FNV-1a 64 over the
 * values before it, in this order, each with its NUL) and data_checksum (FNV-1a 64 over the
 * 32-bit words of every tensor in file order), both as 16 lowercase hex digits. Files
 * without a model are written as version 1, byte for byte as before version 2 existed.
 *
 * Saving reads the tensors twice (checksum, then data), one tensor at a time on the host.
 * Loading checks everything (structure, names, shapes, both checksums) before it changes
 * the optimizer or a parameter, then copies one tensor at a time into the tensors, whose
 * tilings may differ from those of the saving run.
 */
#include "optim.h"

#include "../io/io.h"
#include "../models/models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_FORMAT "nnt-train-state"
#define STATE_VERSION "1"        /* without a model record                              */
#define STATE_VERSION_MODEL "2"  /* with one                                             */
#define MAXFIELDS 3      /* param + two state tensors */

/* Metadata keys in checksum order; the two checksums last (not hashed). */
enum {
    META_FORMAT, META_VERSION, META_OPTIMIZER, META_STEP, META_DATA_POS, META_RNG,
    META_OPTIONS, META_MODEL, META_CHECKSUM, META_DATA_CHECKSUM, NMETA
};
static const char *const meta_keys[NMETA] = {
    "format", "format_version", "optimizer", "step", "data_pos", "rng", "options", "model",
    "meta_checksum", "data_checksum"};

/* The values before the checksums; the model only where present (version 2). */
static uint64_t hash_meta(const char *const values[NMETA])
{
    uint64_t h = NNT_FNV_OFFSET;
    for (int i = 0; i < META_CHECKSUM; i++)
        if (values[i])
            h = nnt_fnv1a_bytes(h, values[i], strlen(values[i]) + 1);
    return h;
}

static int io_fail(nnt_ctx *ctx, const char *fn, int rc, const char *err)
{
    return nnt_fail(ctx, rc, "%s: %s", fn, err);
}

/* ---- the tensors of a file ------------------------------------------------------------ */

/* Fields in the file for an optimizer at this step: 1 (parameters) + its state tensors. */
static int nfields(const nnt_optim *opt, int64_t step)
{
    return 1 + (step > 0 ? nnt_optim_nstate(&opt->opts) : 0);
}

static const char *field_prefix(const nnt_optim *opt, int f)
{
    return f == 0 ? "param" : nnt_optim_state_prefix(&opt->opts, f - 1);
}

static nnt_tensor *field_tensor(const nnt_optim_param *p, int f)
{
    return f == 0 ? p->value : p->state[f - 1];
}

/* "<prefix>.<name>" in name (NNT_IO_MAXNAME + 1 bytes). */
static void tensor_name(const nnt_optim *opt, int f, const nnt_optim_param *p, char *name)
{
    snprintf(name, NNT_IO_MAXNAME + 1, "%s.%s", field_prefix(opt, f), p->name);
}

/* Largest parameter, in elements (a host buffer for one tensor). */
static int max_numel(const nnt_optim *opt, int64_t *max)
{
    *max = 1;
    for (int i = 0; i < opt->nparams; i++) {
        int64_t n = 0;
        int rc = nnt_tensor_numel(opt->params[i].value, &n);
        if (rc)
            return rc;
        if (n > *max)
            *max = n;
    }
    return NNT_OK;
}

static int alloc_buffer(const nnt_optim *opt, const char *fn, float **buf, int64_t *numel)
{
    int rc = max_numel(opt, numel);
    if (rc)
        return rc;
    *buf = malloc((size_t)*numel * sizeof(float));
    return *buf ? NNT_OK : nnt_fail(opt->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
}

static int to_host(nnt_tensor *t, float *buf, int64_t *n)
{
    int rc = nnt_tensor_numel(t, n);
    return rc ? rc : nnt_tensor_to_host_f32(t, buf, *n);
}

/* ---- save ------------------------------------------------------------------------------ */

/* Checksum of every tensor in file order. */
static int data_checksum(const nnt_optim *opt, float *buf, uint64_t *sum)
{
    uint64_t h = NNT_FNV_OFFSET;
    for (int f = 0; f < nfields(opt, opt->step); f++)
        for (int i = 0; i < opt->nparams; i++) {
            int64_t n = 0;
            int rc = to_host(field_tensor(&opt->params[i], f), buf, &n);
            if (rc)
                return rc;
            h = nnt_fnv1a_floats(h, buf, (size_t)n);
        }
    *sum = h;
    return NNT_OK;
}

/* Metadata values (text: NMETA buffers of 96 bytes; options borrowed from st; model: the
 * model record or NULL). */
static void meta_values(const nnt_optim *opt, const nnt_train_state *st, const char *model,
                        uint64_t data_sum, char text[][96], const char *values[NMETA])
{
    static const nnt_train_state none = NNT_TRAIN_STATE_INIT;
    if (!st)
        st = &none;
    values[META_FORMAT] = STATE_FORMAT;
    values[META_VERSION] = model ? STATE_VERSION_MODEL : STATE_VERSION;
    values[META_OPTIMIZER] = nnt_optim_kind_name(opt->opts.kind);
    snprintf(text[META_STEP], 96, "%lld", (long long)opt->step);
    snprintf(text[META_DATA_POS], 96, "%llu", (unsigned long long)st->data_pos);
    snprintf(text[META_RNG], 96, "[%llu,%llu,%llu,%llu]", (unsigned long long)st->rng[0],
             (unsigned long long)st->rng[1], (unsigned long long)st->rng[2],
             (unsigned long long)st->rng[3]);
    for (int i = META_STEP; i <= META_RNG; i++)
        values[i] = text[i];
    values[META_OPTIONS] = st->options ? st->options : "";
    values[META_MODEL] = model;
    snprintf(text[META_CHECKSUM], 96, "%016llx", (unsigned long long)hash_meta(values));
    snprintf(text[META_DATA_CHECKSUM], 96, "%016llx", (unsigned long long)data_sum);
    values[META_CHECKSUM] = text[META_CHECKSUM];
    values[META_DATA_CHECKSUM] = text[META_DATA_CHECKSUM];
}

static int declare(const nnt_optim *opt, nnt_st_writer *w, const char *const values[NMETA],
                   char *err, size_t errlen)
{
    char name[NNT_IO_MAXNAME + 1];
    int rc = NNT_OK;
    for (int i = 0; i < NMETA && rc == 0; i++)
        if (values[i])
            rc = nnt_st_writer_meta(w, meta_keys[i], values[i], err, errlen);
    for (int f = 0; f < nfields(opt, opt->step) && rc == 0; f++)
        for (int i = 0; i < opt->nparams && rc == 0; i++) {
            const nnt_optim_param *p = &opt->params[i];
            int ndim = 0;
            int64_t shape[NNT_MAX_DIMS];
            rc = nnt_tensor_ndim(p->value, &ndim);
            if (rc == 0)
                rc = nnt_tensor_shape(p->value, shape);
            if (rc) {
                snprintf(err, errlen, "parameter '%s': %s", p->name, nnt_ctx_last_error(NULL));
                return rc;
            }
            tensor_name(opt, f, p, name);
            rc = nnt_st_writer_add(w, name, NNT_IO_F32, ndim, shape, NULL, err, errlen);
        }
    return rc;
}

/* Tensor data in file order; *io: whether a failure comes from the writer (message in err). */
static int stream(const nnt_optim *opt, nnt_st_writer *w, float *buf, int *io, char *err,
                  size_t errlen)
{
    for (int f = 0; f < nfields(opt, opt->step); f++)
        for (int i = 0; i < opt->nparams; i++) {
            int64_t n = 0;
            *io = 0;
            int rc = to_host(field_tensor(&opt->params[i], f), buf, &n);
            if (rc)
                return rc;
            *io = 1;
            rc = nnt_st_writer_write(w, buf, (size_t)n * sizeof(float), err, errlen);
            if (rc)
                return rc;
        }
    return NNT_OK;
}

static int write_file(const nnt_optim *opt, const char *fn, const char *path,
                      const char *const values[NMETA], float *buf)
{
    char err[NNT_IO_ERRLEN] = "";
    nnt_st_writer *w = NULL;
    int io = 1;
    int rc = nnt_st_writer_begin(path, &w, err, sizeof err);
    if (rc == 0)
        rc = declare(opt, w, values, err, sizeof err);
    if (rc == 0)
        rc = stream(opt, w, buf, &io, err, sizeof err);
    if (rc == 0) {
        io = 1;
        rc = nnt_st_writer_finish(w, err, sizeof err);   /* frees w */
        w = NULL;
    }
    nnt_st_writer_abort(w);
    return rc && io ? io_fail(opt->ctx, fn, rc, err) : rc;
}

static int bad_section_size(nnt_ctx *ctx, const char *fn, const nnt_train_state *st)
{
    return nnt_fail(ctx, NNT_E_INVAL, "%s: st->size %zu < sizeof(nnt_train_state) %zu "
                    "(initialise it with NNT_TRAIN_STATE_INIT)", fn, st->size, sizeof *st);
}

/* The arguments common to save and load: a live optimizer with parameters, a path, and a
 * user section (may be NULL) whose size field is set. */
static int check_call(const nnt_optim *opt, const char *fn, const char *path,
                      const nnt_train_state *st)
{
    int rc = nnt_optim_check(opt, fn);
    if (rc)
        return rc;
    if (!path)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    if (st && st->size < sizeof *st)
        return bad_section_size(opt->ctx, fn, st);
    if (opt->nparams == 0)
        return nnt_fail(opt->ctx, NNT_E_STATE, "%s: the optimizer has no parameters", fn);
    return NNT_OK;
}

/* The JSON text on one line: newlines and the indentation after them dropped (a newline
 * would be stored as a \u000a escape, whose hex digits JSON reads in either case: one
 * flipped bit there would not change the value the checksum covers). */
static void one_line(char *json)
{
    char *out = json;
    for (const char *in = json; *in; in++) {
        if (*in == '\n') {
            while (in[1] == ' ')
                in++;
            continue;
        }
        *out++ = *in;
    }
    *out = '\0';
}

int nnt_train_state_save(nnt_optim *opt, const char *path, const nnt_train_state *st)
{
    const char *fn = "nnt_train_state_save";
    int rc = check_call(opt, fn, path, st);
    if (rc)
        return rc;
    float *buf = NULL;
    int64_t cap = 0;
    rc = alloc_buffer(opt, fn, &buf, &cap);
    uint64_t sum = 0;
    char *model = NULL;
    const char *const *names = opt->has_model && opt->nlayers == 1   /* a classifier's */
                                   ? nnt_model_label_names_of(opt->layers[0]) : NULL;
    if (rc == 0 && opt->has_model &&
        (rc = nnt_model_config_text_named(opt->ctx, fn, &opt->model, names, &model)) == 0)
        one_line(model);
    if (rc == 0)
        rc = data_checksum(opt, buf, &sum);   /* first pass: nothing written yet */
    if (rc == 0) {
        char text[NMETA][96];
        const char *values[NMETA];
        meta_values(opt, st, model, sum, text, values);
        rc = write_file(opt, fn, path, values, buf);
    }
    free(model);
    free(buf);
    return nnt_mpi_saved(opt->ctx, rc, fn, path);
}

/* ---- load ------------------------------------------------------------------------------ */

typedef struct state_meta {
    const char *values[NMETA];   /* borrowed from the reader */
    int64_t step;
    uint64_t data_pos, rng[4], data_checksum;
} state_meta;

static int bad_meta(nnt_ctx *ctx, const char *fn, const char *path, int key,
                    const char *value, const char *want)
{
    return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: metadata '%s' = '%s' is not %s", fn, path,
                    meta_keys[key], value, want);
}

/* Every key of the file's version present (model: only in version 2); format and version
 * known; the optimizer kind one nnt knows, and kind's when kind is not NULL. */
static int read_meta_strings(nnt_ctx *ctx, const char *kind, const char *fn, const char *path,
                             const nnt_st_reader *r, state_meta *sm)
{
    const char **v = sm->values;
    for (int i = 0; i < NMETA; i++) {
        v[i] = nnt_st_metadata_get(r, meta_keys[i]);
        if (!v[i] && i != META_MODEL)
            return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: no metadata key '%s' (not an nnt "
                            "training state)", fn, path, meta_keys[i]);
    }
    if (strcmp(v[META_FORMAT], STATE_FORMAT) != 0)
        return bad_meta(ctx, fn, path, META_FORMAT, v[META_FORMAT], "'" STATE_FORMAT "'");
    int with_model = strcmp(v[META_VERSION], STATE_VERSION_MODEL) == 0;
    if (!with_model && strcmp(v[META_VERSION], STATE_VERSION) != 0)
        return bad_meta(ctx, fn, path, META_VERSION, v[META_VERSION],
                        STATE_VERSION " or " STATE_VERSION_MODEL);
    if (with_model && !v[META_MODEL])
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: no metadata key 'model' (format_version "
                        STATE_VERSION_MODEL " has one)", fn, path);
    if (!with_model)
        v[META_MODEL] = NULL;   /* not part of a version 1 file */
    int known = 0;
    for (int k = 0; k < NNT_OPTIM_NKINDS; k++)
        known |= strcmp(v[META_OPTIMIZER], nnt_optim_kind_name((nnt_optim_kind)k)) == 0;
    if (!known)
        return bad_meta(ctx, fn, path, META_OPTIMIZER, v[META_OPTIMIZER],
                        "an optimizer nnt knows (adamw, adam, sgd)");
    if (kind && strcmp(v[META_OPTIMIZER], kind) != 0)
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: metadata 'optimizer' = '%s', but this "
                        "optimizer is %s", fn, path, v[META_OPTIMIZER], kind);
    return NNT_OK;
}

static int read_meta(nnt_ctx *ctx, const char *kind, const char *fn, const char *path,
                     const nnt_st_reader *r, state_meta *sm)
{
    int rc = read_meta_strings(ctx, kind, fn, path, r, sm);
    if (rc)
        return rc;
    const char **v = sm->values;
    uint64_t step = 0, meta_sum = 0;
    if (nnt_meta_parse_u64_all(v[META_STEP], &step) || step > INT64_MAX)
        return bad_meta(ctx, fn, path, META_STEP, v[META_STEP], "a non-negative integer");
    sm->step = (int64_t)step;
    if (nnt_meta_parse_u64_all(v[META_DATA_POS], &sm->data_pos))
        return bad_meta(ctx, fn, path, META_DATA_POS, v[META_DATA_POS],
                        "an unsigned 64-bit integer");
    if (nnt_meta_parse_rng(v[META_RNG], sm->rng))
        return bad_meta(ctx, fn, path, META_RNG, v[META_RNG], "[s0,s1,s2,s3]");
    if (nnt_meta_parse_hex64(v[META_CHECKSUM], &meta_sum))
        return bad_meta(ctx, fn, path, META_CHECKSUM, v[META_CHECKSUM], "16 hex digits");
    if (nnt_meta_parse_hex64(v[META_DATA_CHECKSUM], &sm->data_checksum))
        return bad_meta(ctx, fn, path, META_DATA_CHECKSUM, v[META_DATA_CHECKSUM],
                        "16 hex digits");
    if (meta_sum != hash_meta(v))
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: the metadata checksum %016llx does "
                        "not match (corrupted file)", fn, path, (unsigned long long)meta_sum);
    return NNT_OK;
}

/* e is F32 of the shape of value. */
/* "(d0, d1, ...)" into buf. */
static void format_shape(int ndim, const int64_t *shape, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", d ? ", " : "",
                                 (long long)shape[d]);
    if (used < cap)
        snprintf(buf + used, cap - used, ")");
}

static int check_entry(const nnt_optim *opt, const char *fn, const char *path,
                       const nnt_st_entry *e, const nnt_tensor *value)
{
    int ndim = 0, same = 1;
    int64_t shape[NNT_MAX_DIMS];
    int rc = nnt_tensor_ndim(value, &ndim);
    if (rc == 0)
        rc = nnt_tensor_shape(value, shape);
    if (rc)
        return rc;
    same = e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = e->shape[d] == shape[d];
    if (e->dtype != NNT_IO_F32 || !same) {
        char file_shape[160], param_shape[160];
        format_shape(e->ndim, e->shape, file_shape, sizeof file_shape);
        format_shape(ndim, shape, param_shape, sizeof param_shape);
        return nnt_fail(opt->ctx, NNT_E_FORMAT, "%s: %s: tensor %s is %s %s, the parameter is "
                        "F32 %s", fn, path, e->name, nnt_io_dtype_name(e->dtype), file_shape,
                        param_shape);
    }
    return NNT_OK;
}

/* Exactly the tensors an optimizer like opt at sm->step writes, of its parameters' shapes. */
static int check_tensors(const nnt_optim *opt, const char *fn, const char *path,
                         const nnt_st_reader *r, const state_meta *sm)
{
    char name[NNT_IO_MAXNAME + 1];
    int nf = nfields(opt, sm->step);
    size_t want = (size_t)nf * (size_t)opt->nparams;
    if (nnt_st_count(r) != want)
        return nnt_fail(opt->ctx, NNT_E_FORMAT, "%s: %s holds %zu tensors, not %zu (%d "
                        "parameters, step %lld)", fn, path, nnt_st_count(r), want,
                        opt->nparams, (long long)sm->step);
    for (int f = 0; f < nf; f++)
        for (int i = 0; i < opt->nparams; i++) {
            tensor_name(opt, f, &opt->params[i], name);
            const nnt_st_entry *e = nnt_st_find(r, name);
            if (!e)
                return nnt_fail(opt->ctx, NNT_E_FORMAT, "%s: %s: no tensor %s", fn, path,
                                name);
            int rc = check_entry(opt, fn, path, e, opt->params[i].value);
            if (rc)
                return rc;
        }
    return NNT_OK;
}

static int read_entry(const nnt_optim *opt, const char *fn, const nnt_st_reader *r,
                      const nnt_st_entry *e, float *buf)
{
    char err[NNT_IO_ERRLEN];
    int rc = nnt_st_read(r, e, NNT_IO_F32, 0, e->numel, buf, err, sizeof err);
    return rc ? io_fail(opt->ctx, fn, rc, err) : NNT_OK;
}

/* The checksum over every tensor in file order must be the stored one. */
static int verify_data(const nnt_optim *opt, const char *fn, const char *path,
                       const nnt_st_reader *r, const state_meta *sm, float *buf)
{
    uint64_t h = NNT_FNV_OFFSET;
    for (size_t i = 0; i < nnt_st_count(r); i++) {
        const nnt_st_entry *e = nnt_st_entry_at(r, i);
        int rc = read_entry(opt, fn, r, e, buf);
        if (rc)
            return rc;
        h = nnt_fnv1a_floats(h, buf, (size_t)e->numel);
    }
    if (h != sm->data_checksum)
        return nnt_fail(opt->ctx, NNT_E_FORMAT, "%s: %s: data checksum %016llx does not match "
                        "the stored %016llx (corrupted file)", fn, path, (unsigned long long)h,
                        (unsigned long long)sm->data_checksum);
    return NNT_OK;
}

/* The tensors of the first nf fields of the file (1: the parameters; nfields: all) into the
 * parameters and state tensors. */
static int import(nnt_optim *opt, const char *fn, const nnt_st_reader *r, int nf, float *buf)
{
    char name[NNT_IO_MAXNAME + 1];
    for (int f = 0; f < nf; f++)
        for (int i = 0; i < opt->nparams; i++) {
            tensor_name(opt, f, &opt->params[i], name);
            const nnt_st_entry *e = nnt_st_find(r, name);
            int rc = read_entry(opt, fn, r, e, buf);
            if (rc == 0)
                rc = nnt_tensor_from_host_f32(field_tensor(&opt->params[i], f), buf,
                                              (int64_t)e->numel);
            if (rc)
                return rc;
        }
    return NNT_OK;
}

static int user_section(nnt_ctx *ctx, const char *fn, const state_meta *sm,
                        nnt_train_state *st)
{
    size_t n = strlen(sm->values[META_OPTIONS]);
    char *options = malloc(n + 1);
    if (!options)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    memcpy(options, sm->values[META_OPTIONS], n + 1);
    st->data_pos = sm->data_pos;
    memcpy(st->rng, sm->rng, sizeof st->rng);
    st->options = options;
    return NNT_OK;
}

static void restore_counters(nnt_optim *opt, int64_t step)
{
    opt->step = step;
    opt->last_lr = step > 0 ? nnt_optim_schedule(&opt->opts, step) : 0.0;
    opt->last_grad_norm = 0.0;
    for (int i = 0; i < opt->nparams; i++)
        opt->params[i].state_written = step > 0;
}

/* Everything is checked before the optimizer and the parameters change. */
static int load_from(nnt_optim *opt, const char *fn, const char *path, const nnt_st_reader *r,
                     nnt_train_state *st)
{
    state_meta sm;
    int rc = read_meta(opt->ctx, nnt_optim_kind_name(opt->opts.kind), fn, path, r, &sm);
    if (rc == 0)
        rc = check_tensors(opt, fn, path, r, &sm);
    float *buf = NULL;
    int64_t cap = 0;
    if (rc == 0)
        rc = alloc_buffer(opt, fn, &buf, &cap);
    if (rc == 0)
        rc = verify_data(opt, fn, path, r, &sm, buf);
    nnt_train_state got = NNT_TRAIN_STATE_INIT;
    if (rc == 0 && st)
        rc = user_section(opt->ctx, fn, &sm, &got);
    if (rc == 0)
        rc = import(opt, fn, r, nfields(opt, sm.step), buf);
    free(buf);
    if (rc == 0 && opt->has_model && opt->nlayers == 1 && sm.values[META_MODEL])
        rc = nnt_model_label_names_load(opt->layers[0], fn, path, sm.values[META_MODEL],
                                        strlen(sm.values[META_MODEL]));   /* a classifier's */
    if (rc) {
        free(got.options);
        return rc;
    }
    restore_counters(opt, sm.step);
    if (st) {
        got.size = st->size;
        *st = got;   /* the caller's options pointer is overwritten, not freed */
    }
    return NNT_OK;
}

int nnt_train_state_load(nnt_optim *opt, const char *path, nnt_train_state *st)
{
    const char *fn = "nnt_train_state_load";
    int rc = check_call(opt, fn, path, st);
    if (rc)
        return rc;
    char err[NNT_IO_ERRLEN];
    nnt_st_reader *r = NULL;
    rc = nnt_st_open(path, &r, err, sizeof err);
    if (rc)
        return io_fail(opt->ctx, fn, rc, err);
    rc = load_from(opt, fn, path, r, st);
    nnt_st_close(r);
    return rc;
}

void nnt_train_state_clear(nnt_train_state *st)
{
    if (!st)
        return;
    size_t size = st->size;
    free(st->options);
    memset(st, 0, sizeof *st);
    st->size = size;
}

int nnt_train_state_info(nnt_ctx *ctx, const char *path, nnt_train_state *st)
{
    const char *fn = "nnt_train_state_info";
    if (ctx)   /* NULL: no context yet (the message goes to nnt_ctx_last_error(NULL)) */
        NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!path || !st)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is NULL", fn, path ? "st" : "path");
    if (st->size < sizeof *st)
        return bad_section_size(ctx, fn, st);
    char err[NNT_IO_ERRLEN];
    nnt_st_reader *r = NULL;
    int rc = nnt_st_open(path, &r, err, sizeof err);
    if (rc)
        return io_fail(ctx, fn, rc, err);
    state_meta sm;
    nnt_train_state got = NNT_TRAIN_STATE_INIT;
    rc = read_meta(ctx, NULL, fn, path, r, &sm);
    if (rc == 0)
        rc = user_section(ctx, fn, &sm, &got);
    nnt_st_close(r);
    if (rc == 0) {
        got.size = st->size;
        *st = got;   /* the caller's options pointer is overwritten, not freed */
    }
    return rc;
}

/* ---- a model from a training state ------------------------------------------------------ */

/* The file's metadata, and the model configuration it records, parsed. */
static int read_model_meta(nnt_ctx *ctx, const char *fn, const char *path,
                           const nnt_st_reader *r, state_meta *sm, nnt_model_config *cfg)
{
    NNT_TRY(read_meta(ctx, NULL, fn, path, r, sm));
    const char *text = sm->values[META_MODEL];
    if (!text)
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s records no model configuration (format_"
                        "version 1: its optimizer's parameters were not those of one model "
                        "alone, or nnt 0.2 wrote it); load it with nnt_train_state_load into "
                        "an optimizer of the same model instead", fn, path);
    size_t what_len = strlen(path) + 32;
    char *what = malloc(what_len);
    if (!what)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    snprintf(what, what_len, "%s (metadata 'model')", path);
    int rc = nnt_model_config_parse(ctx, fn, what, text, strlen(text), cfg);
    free(what);
    return rc;
}

static int open_model_state(nnt_ctx *ctx, const char *fn, const char *path, nnt_st_reader **r,
                            state_meta *sm, nnt_model_config *cfg)
{
    char err[NNT_IO_ERRLEN];
    int rc = nnt_st_open(path, r, err, sizeof err);
    if (rc)
        return io_fail(ctx, fn, rc, err);
    rc = read_model_meta(ctx, fn, path, *r, sm, cfg);
    if (rc) {
        nnt_st_close(*r);
        *r = NULL;
    }
    return rc;
}

/* An optimizer view of model's parameters (values only, names borrowed from the model, no
 * state tensors) of the file's optimizer kind, for check_tensors, verify_data and import;
 * view->params is malloc'd. */
static int model_view(nnt_ctx *ctx, const char *fn, nnt_layer *model, const nnt_st_reader *r,
                      const state_meta *sm, nnt_optim *view)
{
    static const nnt_optim_options defaults = NNT_OPTIM_OPTIONS_INIT;
    memset(view, 0, sizeof *view);
    view->ctx = ctx;
    view->opts = defaults;
    for (int k = 0; k < NNT_OPTIM_NKINDS; k++)
        if (strcmp(sm->values[META_OPTIMIZER], nnt_optim_kind_name((nnt_optim_kind)k)) == 0)
            view->opts.kind = (nnt_optim_kind)k;
    int64_t count = 0;
    NNT_TRY(nnt_layer_num_params(model, &count, NULL));
    view->params = calloc((size_t)count + 1, sizeof *view->params);
    if (!view->params)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info info;
        memset(&info, 0, sizeof info);
        info.size = sizeof info;
        NNT_TRY(nnt_layer_param(model, i, &info));
        view->params[i].name = (char *)info.name;   /* borrowed: never released */
        view->params[i].value = info.value;
        view->nparams++;
    }
    if (view->opts.kind == NNT_OPTIM_SGD && view->nparams > 0) {
        /* SGD keeps a momentum buffer only with momentum > 0: the file tells */
        char name[NNT_IO_MAXNAME + 1];
        snprintf(name, sizeof name, "sgd_momentum.%s", view->params[0].name);
        view->opts.momentum = nnt_st_find(r, name) ? 0.9 : 0.0;
    }
    return NNT_OK;
}

/* Check the whole file against the model (structure, shapes, checksums), then copy its
 * parameters in. */
static int load_model_params(nnt_ctx *ctx, const char *fn, const char *path,
                             const nnt_st_reader *r, const state_meta *sm, nnt_layer *model)
{
    nnt_optim view;
    int rc = model_view(ctx, fn, model, r, sm, &view);
    if (rc == 0)
        rc = check_tensors(&view, fn, path, r, sm);
    float *buf = NULL;
    int64_t cap = 0;
    if (rc == 0)
        rc = alloc_buffer(&view, fn, &buf, &cap);
    if (rc == 0)
        rc = verify_data(&view, fn, path, r, sm, buf);
    if (rc == 0)
        rc = import(&view, fn, r, 1, buf);
    free(buf);
    free(view.params);
    return rc;
}

int nnt_model_train_state_config(nnt_ctx *ctx, const char *path, nnt_model_config *cfg)
{
    const char *fn = "nnt_model_train_state_config";
    if (ctx)   /* NULL: no context yet (the message goes to nnt_ctx_last_error(NULL)) */
        NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!path || !cfg)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is NULL", fn, path ? "cfg" : "path");
    nnt_st_reader *r = NULL;
    state_meta sm;
    NNT_TRY(open_model_state(ctx, fn, path, &r, &sm, cfg));
    nnt_st_close(r);
    return NNT_OK;
}

int nnt_model_train_state_label_names(nnt_ctx *ctx, const char *fn, const char *path,
                                      int64_t num_labels, char ***names)
{
    nnt_st_reader *r = NULL;
    state_meta sm;
    nnt_model_config cfg;
    *names = NULL;
    NNT_TRY(open_model_state(ctx, fn, path, &r, &sm, &cfg));
    int rc = nnt_model_config_label_names(ctx, fn, path, sm.values[META_MODEL],
                                          strlen(sm.values[META_MODEL]), num_labels, names);
    nnt_st_close(r);
    return rc;
}

int nnt_model_load_train_state(nnt_ctx *ctx, const char *path, int64_t B, int64_t T,
                               const nnt_tiling *tiling, nnt_train_state *st, nnt_layer **out)
{
    const char *fn = "nnt_model_load_train_state";
    if (out)
        *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!path || !out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s is NULL", fn, path ? "out" : "path");
    if (st && st->size < sizeof *st)
        return bad_section_size(ctx, fn, st);
    nnt_st_reader *r = NULL;
    state_meta sm;
    nnt_model_config cfg;
    NNT_TRY(open_model_state(ctx, fn, path, &r, &sm, &cfg));
    nnt_layer *model = NULL;
    nnt_train_state got = NNT_TRAIN_STATE_INIT;
    int rc = nnt_model_build(ctx, fn, &cfg, B, T, tiling, &model);
    if (rc == 0)
        rc = load_model_params(ctx, fn, path, r, &sm, model);
    if (rc == 0)   /* a classifier's label names */
        rc = nnt_model_label_names_load(model, fn, path, sm.values[META_MODEL],
                                        strlen(sm.values[META_MODEL]));
    if (rc == 0 && st)
        rc = user_section(ctx, fn, &sm, &got);
    nnt_st_close(r);
    if (rc) {
        nnt_layer_destroy(model);
        return rc;
    }
    if (st) {
        got.size = st->size;
        *st = got;   /* the caller's options pointer is overwritten, not freed */
    }
    *out = model;
    return NNT_OK;
}
