/* SPDX-License-Identifier: MIT */
/* llm.c GPT-2 checkpoints (fp32, version 3: lib/io's nnt_llmc_*) for GPT-2 models: the GPT
 * layer and the tree of nnt_model_build_tree inside it, whose parameters carry the same
 * names. The file holds
 * 16 parameters, each all layers stacked: wte (Vp, C), wpe (maxT, C), ln1w, ln1b (L, C),
 * qkvw (L, 3C, C), qkvb (L, 3C), attprojw (L, C, C), attprojb (L, C), ln2w, ln2b (L, C),
 * fcw (L, 4C, C), fcb (L, 4C), fcprojw (L, C, 4C), fcprojb (L, C), lnfw, lnfb (C); linear
 * weights (out, in) as nnt's, so a tree parameter is a contiguous slice of one of them
 * (the GPT-2 family's llmc table, lib/models/gpt2.c). wte's Vp - V padding rows are skipped on load and written as zeros. */
#include "models.h"
#include "family.h"

#include "../io/io.h"
#include "../layers/layer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model's parameters in the file's order: the family's table (GPT-2's names). */
static const nnt_llmc_name *llmc_map(int *n)
{
    *n = nnt_family_gpt2.nllmc;
    return nnt_family_gpt2.llmc;
}

static int per_layer(int k)
{
    return k >= NNT_LLMC_LN1W && k <= NNT_LLMC_FCPROJB;
}

/* The padded vocabulary written for V: V itself (llm.c pads to a multiple of 128 for speed;
 * its reader takes any Vp >= V). */
static int64_t padded_vocab(int64_t V)
{
    return V;
}

/* One tree parameter at its place in the file: value (n floats) at element first of llm.c
 * parameter k. */
typedef struct llmc_piece {
    char name[64];
    nnt_tensor *value;
    int k;
    int64_t n;
    uint64_t first;
} llmc_piece;

static int find_param(nnt_layer *model, const char *fn, const char *name, nnt_tensor **value)
{
    int64_t count = 0;
    NNT_TRY(nnt_layer_num_params(model, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        nnt_param_info p;
        memset(&p, 0, sizeof p);
        p.size = sizeof p;
        NNT_TRY(nnt_layer_param(model, i, &p));
        if (strcmp(p.name, name) == 0) {
            *value = p.value;
            return NNT_OK;
        }
    }
    return nnt_fail(model->ctx, NNT_E_INVAL, "%s: the GPT-2 model has no parameter %s", fn,
                    name);
}

/* Entry m of the table for block l in the layout lp (per-layer slices of L layers): its
 * tensor and place, checked to lie inside the slice (wte: its first V rows of Vp). */
static int piece_at(nnt_layer *model, const char *fn, const nnt_llmc_param *lp, int64_t L,
                    int m, int64_t l, llmc_piece *p)
{
    int n = 0;
    const nnt_llmc_name *e = &llmc_map(&n)[m];
    int64_t slice = (int64_t)lp[e->k].numel / (per_layer(e->k) ? L : 1);
    if (per_layer(e->k))
        snprintf(p->name, sizeof p->name, "%s%lld.%s", nnt_family_gpt2.layout.block,
                 (long long)l, e->name);
    else
        snprintf(p->name, sizeof p->name, "%s", e->name);
    p->k = e->k;
    NNT_TRY(find_param(model, fn, p->name, &p->value));
    NNT_TRY(nnt_tensor_numel(p->value, &p->n));
    if ((e->offset + 1) * p->n > slice)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: parameter %s (%lld floats) does not fit "
                        "llm.c's %s", fn, p->name, (long long)p->n, lp[e->k].name);
    p->first = (uint64_t)((per_layer(e->k) ? l : 0) * slice + e->offset * p->n);
    return NNT_OK;
}

/* Calls f on every piece in file order (llm.c parameter by parameter, layer by layer, the
 * entries of the table of that parameter in turn); stops at the first failure. */
typedef int (*llmc_visit)(nnt_layer *model, const char *fn, const llmc_piece *p, void *arg);

static int each_piece(nnt_layer *model, const char *fn, const nnt_llmc_param *lp, int64_t L,
                      llmc_visit f, void *arg)
{
    int nmap = 0;
    const nnt_llmc_name *map = llmc_map(&nmap);
    for (int m = 0, next; m < nmap; m = next) {
        int k = map[m].k;
        for (next = m; next < nmap && map[next].k == k; next++)
            ;
        for (int64_t l = 0; l < (per_layer(k) ? L : 1); l++)
            for (int e = m; e < next; e++) {
                llmc_piece p;
                NNT_TRY(piece_at(model, fn, lp, L, e, l, &p));
                NNT_TRY(f(model, fn, &p, arg));
            }
    }
    return NNT_OK;
}

/* ---- loading ---- */

static int fill_piece(nnt_layer *model, const char *fn, const llmc_piece *p, void *arg)
{
    const nnt_llmc_reader *r = arg;
    char err[NNT_IO_ERRLEN];
    float *buf = malloc((size_t)p->n * sizeof *buf);
    if (!buf)
        return nnt_fail(model->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    int rc = nnt_llmc_read(r, p->k, p->first, (uint64_t)p->n, buf, err, sizeof err);
    if (rc)
        rc = nnt_fail(model->ctx, rc, "%s: %s", fn, err);
    else
        rc = nnt_tensor_from_host_f32(p->value, buf, p->n);
    free(buf);
    return rc;
}

/* The GPT-2 configuration of an llm.c header. */
static nnt_model_config config_of(const nnt_llmc_config *lc)
{
    return nnt_gpt2_model_config(lc->vocab_size, lc->max_seq_len, lc->num_layers,
                                 lc->num_heads, lc->channels);
}

int nnt_model_llmc_config(nnt_ctx *ctx, const char *fn, const char *path,
                          nnt_model_config *cfg)
{
    char err[NNT_IO_ERRLEN];
    nnt_llmc_reader *r = NULL;
    int rc = nnt_llmc_open(path, &r, err, sizeof err);   /* its messages name path */
    if (rc)
        return nnt_fail(ctx, rc, "%s: %s", fn, err);
    *cfg = config_of(nnt_llmc_config_of(r));
    nnt_llmc_close(r);
    return NNT_OK;
}

int nnt_model_load_llmc(nnt_ctx *ctx, const char *fn, const char *path, int64_t B,
                        int64_t T, const nnt_tiling *tiling, int tree, nnt_layer **out)
{
    char err[NNT_IO_ERRLEN];
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!path)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    nnt_llmc_reader *r = NULL;
    int rc = nnt_llmc_open(path, &r, err, sizeof err);   /* its messages name path */
    if (rc)
        return nnt_fail(ctx, rc, "%s: %s", fn, err);
    const nnt_llmc_config *lc = nnt_llmc_config_of(r);
    nnt_model_config c = config_of(lc);
    nnt_llmc_param lp[NNT_LLMC_NPARAMS];
    for (int k = 0; k < NNT_LLMC_NPARAMS; k++)
        lp[k] = *nnt_llmc_param_at(r, k);
    nnt_layer *model = NULL;
    rc = tree ? nnt_model_build_tree(ctx, fn, &c, B, T, tiling, &model)
              : nnt_model_build(ctx, fn, &c, B, T, tiling, &model);
    if (rc == 0)
        rc = each_piece(model, fn, lp, c.layers, fill_piece, r);
    nnt_llmc_close(r);
    if (rc) {
        nnt_layer_destroy(model);
        return rc;
    }
    *out = model;
    return NNT_OK;
}

/* ---- saving ---- */

typedef struct llmc_save {
    nnt_llmc_writer *w;
    int64_t padding;     /* floats of zeros after wte: (Vp - V) * C */
    int64_t most;        /* floats in buf: the largest piece */
    float *buf;
    int io;              /* the failure is lib/io's (message in err) */
    char err[NNT_IO_ERRLEN];
} llmc_save;

static int most_floats(nnt_layer *model, const char *fn, const llmc_piece *p, void *arg)
{
    (void)model;
    (void)fn;
    llmc_save *s = arg;
    s->most = p->n > s->most ? p->n : s->most;
    return NNT_OK;
}

/* wte's padding rows: zeros, buf at a time. */
static int write_padding(llmc_save *s)
{
    memset(s->buf, 0, (size_t)s->most * sizeof *s->buf);
    s->io = 1;
    for (int64_t left = s->padding, n; left > 0; left -= n) {
        n = left < s->most ? left : s->most;
        NNT_TRY(nnt_llmc_writer_write(s->w, s->buf, (size_t)n, s->err, sizeof s->err));
    }
    return NNT_OK;
}

static int write_piece(nnt_layer *model, const char *fn, const llmc_piece *p, void *arg)
{
    (void)model;
    (void)fn;
    llmc_save *s = arg;
    s->io = 0;
    NNT_TRY(nnt_tensor_to_host_f32(p->value, s->buf, p->n));
    s->io = 1;
    NNT_TRY(nnt_llmc_writer_write(s->w, s->buf, (size_t)p->n, s->err, sizeof s->err));
    return p->k == NNT_LLMC_WTE ? write_padding(s) : NNT_OK;
}

/* The llm.c header of a GPT-2 configuration; every size must fit an int32. */
static int header_of(nnt_layer *model, const char *fn, const nnt_model_config *c,
                     nnt_llmc_config *lc)
{
    int64_t vp = padded_vocab(c->vocab);
    if (c->family != NNT_FAMILY_GPT2)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: llm.c checkpoints hold GPT-2 models "
                        "only, not this Llama-family one", fn);
    if (vp > INT32_MAX || c->max_seq > INT32_MAX || c->layers > INT32_MAX ||
        c->channels > INT32_MAX)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: the model is too large for an llm.c "
                        "header (int32 sizes)", fn);
    lc->max_seq_len = (int32_t)c->max_seq;
    lc->vocab_size = (int32_t)c->vocab;
    lc->num_layers = (int32_t)c->layers;
    lc->num_heads = (int32_t)c->heads;
    lc->channels = (int32_t)c->channels;
    lc->padded_vocab_size = (int32_t)vp;
    return NNT_OK;
}

int nnt_model_save_llmc(nnt_layer *model, const char *fn, const char *path)
{
    nnt_model_config c;
    nnt_llmc_config lc;
    nnt_llmc_param lp[NNT_LLMC_NPARAMS];
    NNT_TRY(nnt_model_config_get(model, fn, &c));
    if (!path)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    NNT_TRY(header_of(model, fn, &c, &lc));
    llmc_save s = {NULL, 0, 0, NULL, 1, ""};
    s.padding = ((int64_t)lc.padded_vocab_size - lc.vocab_size) * lc.channels;
    int rc = nnt_llmc_layout(&lc, lp, NULL, s.err, sizeof s.err);
    if (rc)
        return nnt_fail(model->ctx, rc, "%s: %s", fn, s.err);
    NNT_TRY(each_piece(model, fn, lp, c.layers, most_floats, &s));
    if (!(s.buf = malloc((size_t)s.most * sizeof *s.buf)))
        return nnt_fail(model->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    rc = nnt_llmc_writer_begin(path, &lc, &s.w, s.err, sizeof s.err);
    if (rc == 0)
        rc = each_piece(model, fn, lp, c.layers, write_piece, &s);
    if (rc == 0) {
        s.io = 1;
        rc = nnt_llmc_writer_finish(s.w, s.err, sizeof s.err);   /* frees w */
        s.w = NULL;
    }
    nnt_llmc_writer_abort(s.w);
    free(s.buf);
    return rc && s.io ? nnt_fail(model->ctx, rc, "%s: %s", fn, s.err) : rc;
}
