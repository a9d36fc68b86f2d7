/* SPDX-License-Identifier: MIT */
/* Hugging Face model directories (nnt_model_load_hf, nnt_model_save_hf): config.json through
 * lib/models/config_json.c, and the weights, model.safetensors or the shards of an index
 * (lib/models/hf_shards.c), read and written under the names of the model's family
 * (lib/models/family.h): either every parameter under its own name (the Llama family's tree
 * carries HF's names), or a family's table of tensors made of parameters (GPT-2's c_attn =
 * q, k, v; Conv1D weights transposed). Only the shapes differ from nnt's: HF has 2-D matrices
 * in the same memory order, rows being all dimensions but the last (or the first, for an
 * output projection (C, NH, hd)); biases and norms 1-D. An architecture whose files nest the
 * model in a larger one (Gemma3ForConditionalGeneration's language model) is read through
 * its nesting: names renamed, the other model's tensors skipped. A family may name other
 * places where a file holds a parameter (nnt_hf_alt: the MoE family's fused expert
 * tensors), read when the file lacks its own name, and tensors that stack many parameters
 * (nnt_hf_stack: gpt-oss's experts), read and written a slice (an index of their first
 * dimension) at a time, read from MXFP4 blocks and scales too. nnt_gpt_load_safetensors and
 * nnt_gpt_save_safetensors are these functions too. */
#include "models.h"
#include "family.h"
#include "hf_shards.h"
#include "bnb4.h"

#include "../io/io.h"
#include "../layers/layer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the file's tensors ------------------------------------------------------------------ */

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static nnt_param_info param_of(nnt_layer *model, int64_t i)
{
    nnt_param_info p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    if (nnt_layer_param(model, i, &p))
        p.name = NULL;
    return p;
}

/* The index of the parameter called name, looked for from hint on (then from 0: a stack's
 * members are near one another among the parameters), or -1. */
static int64_t param_index(nnt_layer *model, int64_t count, const char *name, int64_t hint)
{
    hint = hint < 0 || hint >= count ? 0 : hint;
    for (int64_t k = 0; k < count; k++) {
        int64_t i = (hint + k) % count;
        nnt_param_info p = param_of(model, i);
        if (p.name && strcmp(p.name, name) == 0)
            return i;
    }
    return -1;
}

/* "(a, b)" */
static void shape_text(int nd, const int64_t *shape, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, size, "(");
    for (int i = 0; i < nd && n < size; i++)
        n += (size_t)snprintf(out + n, size - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < size)
        snprintf(out + n, size - n, ")");
}

/* A member of a stacked tensor (nnt_hf_member) resolved: the parameter viewed as (rows,
 * cols), element (r, c) at offset + r stride[0] + c stride[1] of the stack, all of it in the
 * stack's slice (index of its first dimension) slice. */
typedef struct hf_member_at {
    const char *name;
    nnt_tensor *value;
    int64_t index;         /* among the model's parameters */
    int64_t rows, cols, offset, stride[2], slice;
} hf_member_at;

/* One tensor of a Hugging Face file: its name (with the family's prefix), its parts (the
 * model's parameters, n[i] floats each, one after the other in it), its HF shape (nd dims),
 * and in: a Conv1D weight's in size (stored (in, out); 0: none). When loading from another
 * place the family names (nnt_hf_alt), name and shape are that tensor's, and the parts
 * start at element offset of it. A stacked tensor (stacked: np 0) has its members instead
 * of parts, its shape that of stack, total its elements, slices slices of slice_n. */
typedef struct hf_tensor {
    char name[NNT_IO_MAXNAME + 1];
    const char *bare;      /* name without the family's prefix (inside name) */
    nnt_param_info p[3];
    int64_t index[3];      /* the parts' indices among the model's parameters */
    int np, nd;
    int64_t n[3], total;   /* the parts' elements, their sum */
    int64_t shape[3], in, offset;
    int64_t groups;        /* > 0: the parts' rows group by group in the file (per_head: by
                              key/value head) */
    int stacked;
    nnt_hf_stack stack;
    hf_member_at *members; /* stack.members of them (malloc'd by stack_tensor) */
    int64_t slices, slice_n, member_most;   /* member_most: the largest member's elements */
} hf_tensor;

/* t's HF shape from its first part's nnt shape (the rules of nnt_hf_spec; parts of two or
 * more dimensions, not biases: (their rows summed, the last dimension)). */
static int hf_layout(nnt_ctx *ctx, const char *fn, hf_tensor *t, int conv1d, int rows_first)
{
    int nd = 0;
    int64_t s[NNT_MAX_DIMS];
    NNT_TRY(nnt_tensor_ndim(t->p[0].value, &nd));
    NNT_TRY(nnt_tensor_shape(t->p[0].value, s));
    t->total = 0;
    for (int i = 0; i < t->np; i++) {
        NNT_TRY(nnt_tensor_numel(t->p[i].value, &t->n[i]));
        t->total += t->n[i];
    }
    if (nd <= conv1d || nd <= rows_first)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: parameter %s has %d dims", fn, t->p[0].name, nd);
    int64_t total = t->total;
    t->in = t->offset = t->groups = 0;
    if (conv1d) {   /* Conv1D (in, out) */
        t->in = 1;
        for (int d = nd - conv1d; d < nd; d++)
            t->in *= s[d];
        t->nd = 2;
        t->shape[0] = t->in;
        t->shape[1] = total / t->in;
    } else if (t->np == 1 && nd >= 2 && !ends_with(t->name, ".bias")) {
        int64_t rows = 1;
        for (int d = 0; d < (rows_first ? rows_first : nd - 1); d++)
            rows *= s[d];
        t->nd = 2;
        t->shape[0] = rows;
        t->shape[1] = total / rows;
    } else if (nd >= 2 && !ends_with(t->name, ".bias")) {   /* parts along the rows */
        t->nd = 2;
        t->shape[1] = s[nd - 1];
        t->shape[0] = total / s[nd - 1];
    } else {
        t->nd = 1;
        t->shape[0] = total;
    }
    return NNT_OK;
}

/* What a pass over the file's tensors knows: the model, its family, its parameters. */
typedef struct hf_pass {
    nnt_layer *model;
    const char *fn;
    const nnt_family *f;
    nnt_model_config cfg;
    int64_t count;
} hf_pass;

static void hf_name(hf_tensor *t, const nnt_family *f, const char *block, const char *name)
{
    size_t prefix = strlen(f->hf_prefix);
    snprintf(t->name, sizeof t->name, "%s%s%s", f->hf_prefix, block, name);
    t->bare = t->name + (prefix < strlen(t->name) ? prefix : strlen(t->name));
}

/* The tensor of spec h for block l (l ignored for the others). */
static int spec_tensor(const hf_pass *ps, const nnt_hf_spec *h, int64_t l, hf_tensor *t)
{
    char block[64] = "", hf_block[64] = "", pname[NNT_IO_MAXNAME + 1];
    if (h->block) {
        snprintf(block, sizeof block, "%s%lld.", ps->f->layout.block, (long long)l);
        snprintf(hf_block, sizeof hf_block, "%s%lld.", ps->f->hf_block, (long long)l);
    }
    hf_name(t, ps->f, hf_block, h->hf);
    for (t->np = 0; t->np < 3 && h->parts[t->np]; t->np++) {
        snprintf(pname, sizeof pname, "%s%s", block, h->parts[t->np]);
        int64_t i = param_index(ps->model, ps->count, pname, 0);
        if (i < 0)
            return nnt_fail(ps->model->ctx, NNT_E_INVAL, "%s: the %s model has no parameter %s",
                            ps->fn, ps->f->title, pname);
        t->p[t->np] = param_of(ps->model, i);
        t->index[t->np] = i;
    }
    return hf_layout(ps->model->ctx, ps->fn, t, h->conv1d, h->rows_first);
}

void nnt_hf_rename_modules(const char *name, const char *const (*renames)[2], int n,
                           char *out, size_t size)
{
    char buf[NNT_IO_MAXNAME + 1];
    snprintf(out, size, "%s", name);
    for (int i = 0; i < n; i++) {
        const char *at = strstr(out, renames[i][0]);
        size_t k = strlen(renames[i][0]);
        if (!at || (at[k] != '.' && at[k] != '\0'))
            continue;
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - out), out, renames[i][1], at + k);
        snprintf(out, size, "%s", buf);
    }
}

/* Parameter i under its own name. */
static int own_tensor(const hf_pass *ps, int64_t i, hf_tensor *t)
{
    t->p[0] = param_of(ps->model, i);
    t->index[0] = i;
    t->np = 1;
    if (!t->p[0].name)
        return nnt_fail(ps->model->ctx, NNT_E_INVAL, "%s: parameter %lld unreadable", ps->fn,
                        (long long)i);
    if (ps->f->hf_rename) {
        char renamed[NNT_IO_MAXNAME + 1];
        ps->f->hf_rename(&ps->cfg, t->p[0].name, renamed, sizeof renamed);
        hf_name(t, ps->f, "", renamed);
    } else
        hf_name(t, ps->f, "", t->p[0].name);
    int rows_first = 0;
    for (const char *const *r = ps->f->hf_rows_first; r && *r; r++)
        if (ends_with(t->p[0].name, *r))
            rows_first = 1;
    return hf_layout(ps->model->ctx, ps->fn, t, 0, rows_first);
}

void nnt_rows_by_group(const float *src, float *dst, int nparts, const int64_t *part_n,
                       int64_t groups, int to_parts)
{
    int64_t part_at = 0, group_at = 0;   /* part p's start in the parts; its rows in a group */
    int64_t group = 0;                   /* a group's floats                                 */
    for (int p = 0; p < nparts; p++)
        group += part_n[p] / groups;
    for (int p = 0; p < nparts; p++) {
        int64_t rows = part_n[p] / groups;   /* part p's floats in each group */
        for (int64_t g = 0; g < groups; g++) {
            int64_t at_parts = part_at + g * rows, at_groups = g * group + group_at;
            memcpy(dst + (to_parts ? at_parts : at_groups),
                   src + (to_parts ? at_groups : at_parts), (size_t)rows * sizeof *dst);
        }
        part_at += part_n[p];
        group_at += rows;
    }
}

/* A per-group fused tensor's groups: the key/value heads (its k part's first dimension),
 * each part's rows divided evenly among them. */
static int per_head_groups(const hf_pass *ps, hf_tensor *t)
{
    int64_t shape[NNT_MAX_DIMS];
    NNT_TRY(nnt_tensor_shape(t->p[t->np > 1 ? 1 : 0].value, shape));   // (NKV, hd, ...)
    for (int i = 0; i < t->np; i++)
        if (shape[0] < 1 || t->n[i] % shape[0])
            return nnt_fail(ps->model->ctx, NNT_E_INVAL, "%s: %s's part %d (%lld elements) "
                            "does not divide into %lld key/value heads", ps->fn, t->name, i,
                            (long long)t->n[i], (long long)shape[0]);
    t->groups = shape[0];
    return NNT_OK;
}

/* Parameter i's place among the family's fused tensors: 0 none, 1 the first part of one (t
 * is then that tensor), 2 another part (visited with the first), or a negative NNT_E_*. */
static int fused_tensor(const hf_pass *ps, int64_t i, hf_tensor *t)
{
    nnt_param_info p = param_of(ps->model, i);
    for (int k = 0; p.name && k < ps->f->nhf_fused; k++) {
        const nnt_hf_fused *fu = &ps->f->hf_fused[k];
        for (int j = 0; j < 3 && fu->parts[j]; j++) {
            if (!ends_with(p.name, fu->parts[j]))
                continue;
            if (j)
                return 2;
            char prefix[NNT_IO_MAXNAME + 1], pname[NNT_IO_MAXNAME + 1];
            size_t n = strlen(p.name) - strlen(fu->parts[0]);
            snprintf(prefix, sizeof prefix, "%.*s", (int)n, p.name);
            for (t->np = 0; t->np < 3 && fu->parts[t->np]; t->np++) {
                snprintf(pname, sizeof pname, "%s%s", prefix, fu->parts[t->np]);
                int64_t at = param_index(ps->model, ps->count, pname, 0);
                if (at < 0)
                    return nnt_fail(ps->model->ctx, NNT_E_INVAL, "%s: the %s model has no "
                                    "parameter %s", ps->fn, ps->f->title, pname);
                t->p[t->np] = param_of(ps->model, at);
                t->index[t->np] = at;
            }
            snprintf(pname, sizeof pname, "%s%s", prefix, fu->hf);
            hf_name(t, ps->f, "", pname);
            NNT_TRY(hf_layout(ps->model->ctx, ps->fn, t, 0, 0));
            if (fu->per_head)
                NNT_TRY(per_head_groups(ps, t));
            return 1;
        }
    }
    return 0;
}

/* Member j of t's stack resolved into m, checked against the stack. */
static int stack_member(const hf_pass *ps, hf_tensor *t, int64_t j, int64_t *hint,
                        hf_member_at *m)
{
    nnt_ctx *ctx = ps->model->ctx;
    nnt_hf_member hm;
    memset(&hm, 0, sizeof hm);
    ps->f->hf_member(&ps->cfg, &t->stack, j, &hm);
    hm.name[sizeof hm.name - 1] = '\0';
    int64_t i = param_index(ps->model, ps->count, hm.name, *hint);
    if (i < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the %s model has no parameter %s (member %lld "
                        "of %s)", ps->fn, ps->f->title, hm.name, (long long)j, t->name);
    *hint = i + 1;
    nnt_param_info p = param_of(ps->model, i);
    int nd = 0;
    int64_t shape[NNT_MAX_DIMS];
    NNT_TRY(nnt_tensor_ndim(p.value, &nd));
    NNT_TRY(nnt_tensor_shape(p.value, shape));
    m->name = p.name;
    m->value = p.value;
    m->index = i;
    m->cols = nd >= 2 ? shape[nd - 1] : 1;
    m->rows = 1;
    for (int d = 0; d < (nd >= 2 ? nd - 1 : nd); d++)
        m->rows *= shape[d];
    m->offset = hm.offset;
    m->stride[0] = hm.stride[0];
    m->stride[1] = m->cols > 1 ? hm.stride[1] : 0;
    int64_t last = m->offset + (m->rows - 1) * m->stride[0] + (m->cols - 1) * m->stride[1];
    m->slice = m->offset >= 0 ? m->offset / t->slice_n : -1;
    if (m->offset < 0 || m->stride[0] < 0 || m->stride[1] < 0 || m->rows < 1 ||
        m->cols < 1 || last >= t->total || last / t->slice_n != m->slice)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: member %s of %s (%lld x %lld at offset %lld, "
                        "strides %lld, %lld) is not within one slice of its %lld x %lld "
                        "elements", ps->fn, m->name, t->name, (long long)m->rows,
                        (long long)m->cols, (long long)m->offset, (long long)m->stride[0],
                        (long long)m->stride[1], (long long)t->slices, (long long)t->slice_n);
    return NNT_OK;
}

/* Parameter i's place among the family's stacked tensors: 0 none, 1 the first member of one
 * (t is then that tensor, its members malloc'd), 2 another member (visited with the first),
 * or a negative NNT_E_*. */
static int stack_tensor(const hf_pass *ps, int64_t i, hf_tensor *t)
{
    nnt_ctx *ctx = ps->model->ctx;
    nnt_param_info p = param_of(ps->model, i);
    if (!p.name)
        return 0;   /* own_tensor says it */
    memset(&t->stack, 0, sizeof t->stack);
    int k = ps->f->hf_stack(&ps->cfg, p.name, &t->stack);
    if (k == 0 || k == 2)
        return k;
    nnt_hf_stack *s = &t->stack;
    s->name[sizeof s->name - 1] = '\0';
    int ok = k == 1 && s->name[0] && s->nd >= 1 && s->nd <= 3 && s->members >= 1 &&
             (!s->mxfp4 || s->nd == 3);
    int64_t total = 1;
    for (int d = 0; ok && d < s->nd; d++) {
        ok = s->shape[d] >= 1 && s->shape[d] <= INT64_MAX / total;
        total *= ok ? s->shape[d] : 1;
    }
    if (!ok)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: the %s family's stacked tensor of parameter %s "
                        "(\"%s\", %d dims, %lld members%s) is not one", ps->fn, ps->f->title,
                        p.name, s->name, s->nd, (long long)s->members,
                        s->mxfp4 ? ", mxfp4" : "");
    hf_name(t, ps->f, "", s->name);
    t->np = 0;
    t->nd = s->nd;
    memset(t->shape, 0, sizeof t->shape);
    memcpy(t->shape, s->shape, (size_t)s->nd * sizeof *t->shape);
    t->total = total;
    t->in = t->offset = t->groups = 0;
    t->slices = s->nd >= 2 ? s->shape[0] : 1;
    t->slice_n = total / t->slices;
    t->member_most = 0;
    if (!(t->members = calloc((size_t)s->members, sizeof *t->members)))
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", ps->fn);
    int64_t hint = i, sum = 0;
    int rc = NNT_OK, first = 0;
    for (int64_t j = 0; j < s->members && rc == 0; j++) {
        hf_member_at *m = &t->members[j];
        rc = stack_member(ps, t, j, &hint, m);
        sum += rc ? 0 : m->rows * m->cols;
        first |= rc == 0 && m->index == i;
        if (rc == 0 && m->rows * m->cols > t->member_most)
            t->member_most = m->rows * m->cols;
    }
    if (rc == 0 && !first)
        rc = nnt_fail(ctx, NNT_E_INVAL, "%s: %s, the stacked tensor of parameter %s, does not "
                      "have it as a member", ps->fn, t->name, p.name);
    if (rc == 0 && sum != total)
        rc = nnt_fail(ctx, NNT_E_INVAL, "%s: the members of %s have %lld elements, it %lld",
                      ps->fn, t->name, (long long)sum, (long long)total);
    if (rc) {
        free(t->members);
        t->members = NULL;
        return rc;
    }
    t->stacked = 1;
    return 1;
}

/* Calls visit on every tensor of the model's Hugging Face file, in file order; stops at the
 * first failure. */
typedef int (*hf_visit)(const hf_pass *ps, hf_tensor *t, void *arg);

#define SCORE NNT_CLASSIFIER_HEAD ".weight"   /* a classifier's head */

/* A classifier's head, after the model's other tensors (where transformers saves it). */
static int visit_score(const hf_pass *ps, hf_tensor *t, hf_visit visit, void *arg)
{
    if (ps->cfg.num_labels < 1)
        return NNT_OK;
    int64_t i = param_index(ps->model, ps->count, SCORE, ps->count - 1);
    if (i < 0)
        return nnt_fail(ps->model->ctx, NNT_E_INVAL, "%s: the classifier has no parameter %s",
                        ps->fn, SCORE);
    t->p[0] = param_of(ps->model, i);
    t->index[0] = i;
    t->np = 1;
    snprintf(t->name, sizeof t->name, "%s", SCORE);
    t->bare = t->name;
    NNT_TRY(hf_layout(ps->model->ctx, ps->fn, t, 0, 0));
    return visit(ps, t, arg);
}

static int hf_each(nnt_layer *model, const char *fn, hf_visit visit, void *arg)
{
    hf_pass ps = {model, fn, NULL, {0}, 0};
    NNT_TRY(nnt_model_config_get(model, fn, &ps.cfg));
    NNT_TRY(nnt_layer_num_params(model, &ps.count, NULL));
    ps.f = nnt_family_find(ps.cfg.family);
    hf_tensor t;
    t.stacked = 0;
    t.members = NULL;
    if (!ps.f->hf_specs) {
        nnt_layer *tree = model->vt->inner ? model->vt->inner(model) : model;
        NNT_TRY(nnt_layer_num_params(tree, NULL, NULL));
        for (int64_t i = 0; i < ps.count; i++) {
            if (nnt_layer_listed(tree, i)->adapter)   /* not the model's: PEFT files */
                continue;
            const char *pname = param_of(ps.model, i).name;
            if (ps.cfg.num_labels > 0 && pname && strcmp(pname, SCORE) == 0)
                continue;   /* visit_score's */
            int stacked = ps.f->hf_stack ? stack_tensor(&ps, i, &t) : 0;
            if (stacked < 0)
                return stacked;
            if (stacked == 2)
                continue;
            if (stacked == 1) {
                int rc = visit(&ps, &t, arg);
                free(t.members);
                t.members = NULL;
                t.stacked = 0;
                NNT_TRY(rc);
                continue;
            }
            int fused = fused_tensor(&ps, i, &t);
            if (fused < 0)
                return fused;
            if (fused == 2)
                continue;
            if (!fused)
                NNT_TRY(own_tensor(&ps, i, &t));
            NNT_TRY(visit(&ps, &t, arg));
        }
        return visit_score(&ps, &t, visit, arg);
    }
    for (int k = 0; k < ps.f->nhf_specs; k++) {
        const nnt_hf_spec *h = &ps.f->hf_specs[k];
        for (int64_t l = 0; l < (h->block ? ps.cfg.layers : 1); l++) {
            NNT_TRY(spec_tensor(&ps, h, l, &t));
            NNT_TRY(visit(&ps, &t, arg));
        }
    }
    return visit_score(&ps, &t, visit, arg);
}

/* The file names of a model's parameters (nnt_layer.file_names): each part of a file's tensor
 * named after the tensor (with the family's prefix; GPT-NeoX's q_proj, k_proj, v_proj all
 * "gpt_neox.layers.0.attention.query_key_value.weight"), each member of a stacked one too. */
static int name_parts(const hf_pass *ps, hf_tensor *t, void *arg)
{
    char **names = arg;
    for (int64_t k = 0; t->stacked && k < t->stack.members; k++)
        if (!names[t->members[k].index] && !(names[t->members[k].index] = strdup(t->name)))
            return nnt_fail(ps->model->ctx, NNT_E_NOMEM, "%s: out of memory", ps->fn);
    for (int k = 0; k < t->np; k++)
        if (!names[t->index[k]] && !(names[t->index[k]] = strdup(t->name)))
            return nnt_fail(ps->model->ctx, NNT_E_NOMEM, "%s: out of memory", ps->fn);
    return NNT_OK;
}

int nnt_model_file_names(nnt_layer *model, int64_t n, char **names)
{
    int64_t count = 0;
    NNT_TRY(nnt_layer_num_params(model, &count, NULL));
    if (n != count)
        return nnt_fail(model->ctx, NNT_E_INVAL, "nnt_layer_freeze: %lld names for %lld "
                        "parameters", (long long)n, (long long)count);
    return hf_each(model, "nnt_layer_freeze", name_parts, names);
}

/* dst[r ds0 + c ds1] = src[r ss0 + c ss1] for r < rows, c < cols, in tiles of 64 x 64 (one
 * side or the other is strided: transposes, a stack's members). */
static void strided_copy(float *dst, int64_t ds0, int64_t ds1, const float *src, int64_t ss0,
                         int64_t ss1, int64_t rows, int64_t cols)
{
    enum { TILE = 64 };
    for (int64_t r0 = 0; r0 < rows; r0 += TILE)
        for (int64_t c0 = 0; c0 < cols; c0 += TILE) {
            int64_t r1 = r0 + TILE < rows ? r0 + TILE : rows;
            int64_t c1 = c0 + TILE < cols ? c0 + TILE : cols;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++)
                    dst[r * ds0 + c * ds1] = src[r * ss0 + c * ss1];
        }
}

/* (rows, cols) row-major -> (cols, rows). */
static void transpose(const float *src, float *dst, int64_t rows, int64_t cols)
{
    strided_copy(dst, 1, rows, src, cols, 1, rows, cols);
}

/* ---- saving ----------------------------------------------------------------------------- */

/* One safetensors file being written (model.safetensors or a shard): lib/io's writer (temp
 * file + rename), the host buffers, and where a failure's message is. A pass visits every
 * tensor of the model in file order (ordinal ord); only those in [lo, hi) go to this file.
 * With plan set, declaring records (name, bytes) there instead (the split of a sharded
 * save) and nothing is written. */
typedef struct st_save {
    nnt_st_writer *w;
    float *buf, *tmp;   /* most floats each (NULL while declaring; tmp only if reordering) */
    int64_t most;       /* the largest tensor's floats, found while declaring           */
    int reorders;       /* a declared tensor is stored transposed or regrouped: tmp     */
    int io;             /* the failure is lib/io's (message in err)                     */
    int64_t ord, lo, hi;   /* the tensor being visited; this file's ordinals            */
    nnt_hf_plan *plan;
    char err[NNT_IO_ERRLEN];
} st_save;

/* A pass over the tensors of a model: declare each (name, shape, s->most), or write each. */
typedef int (*st_pass)(nnt_layer *model, const char *fn, st_save *s);

/* The next tensor of a pass is this file's. */
static int st_mine(st_save *s)
{
    int64_t ord = s->ord++;
    return ord >= s->lo && ord < s->hi;
}

/* Declare the next tensor (n floats, streamed through a buffer of need floats): into the
 * plan, or to the writer when it is this file's. */
static int st_declare(st_save *s, const char *name, int nd, const int64_t *shape, int64_t n,
                      int64_t need)
{
    s->io = 1;
    if (s->plan) {
        s->ord++;
        return nnt_hf_plan_add(s->plan, name, (uint64_t)n, (uint64_t)n * sizeof(float),
                               s->err, sizeof s->err);
    }
    if (!st_mine(s))
        return NNT_OK;
    s->most = need > s->most ? need : s->most;
    return nnt_st_writer_add(s->w, name, NNT_IO_F32, nd, shape, NULL, s->err, sizeof s->err);
}

/* Write the file at path with the tensors [lo, hi) of the passes: the header ("format":
 * "pt" and what declare declares), then the data that stream writes, in the same order. */
static int save_st_range(nnt_layer *model, const char *fn, const char *path, st_pass declare,
                         st_pass stream, int64_t lo, int64_t hi)
{
    st_save s = {NULL, NULL, NULL, 1, 0, 1, 0, lo, hi, NULL, ""};
    int rc = nnt_st_writer_begin(path, &s.w, s.err, sizeof s.err);
    if (rc == 0)
        rc = nnt_st_writer_meta(s.w, "format", "pt", s.err, sizeof s.err);
    if (rc == 0)
        rc = declare(model, fn, &s);
    if (rc == 0) {
        s.buf = malloc((size_t)s.most * sizeof(float));
        s.tmp = s.reorders ? malloc((size_t)s.most * sizeof(float)) : NULL;
        if (!s.buf || (s.reorders && !s.tmp))
            rc = nnt_io_errf(s.err, sizeof s.err, NNT_E_NOMEM, "out of memory");
    }
    s.ord = 0;
    if (rc == 0)
        rc = stream(model, fn, &s);
    if (rc == 0) {
        s.io = 1;
        rc = nnt_st_writer_finish(s.w, s.err, sizeof s.err);   /* frees w */
        s.w = NULL;
    }
    nnt_st_writer_abort(s.w);
    free(s.buf);
    free(s.tmp);
    return rc && s.io ? nnt_fail(model->ctx, rc, "%s: %s", fn, s.err) : rc;
}

/* All the tensors in one file at path. */
static int save_st(nnt_layer *model, const char *fn, const char *path, st_pass declare,
                   st_pass stream)
{
    return save_st_range(model, fn, path, declare, stream, 0, INT64_MAX);
}

/* The names and sizes of the tensors declare declares, in file order, into plan. */
static int plan_tensors(nnt_layer *model, const char *fn, st_pass declare, nnt_hf_plan *plan)
{
    st_save s = {NULL, NULL, NULL, 1, 0, 1, 0, 0, 0, plan, ""};
    int rc = declare(model, fn, &s);
    return rc && s.io ? nnt_fail(model->ctx, rc, "%s: %s", fn, s.err) : rc;
}

static int declare_one(const hf_pass *ps, hf_tensor *t, void *arg)
{
    (void)ps;
    st_save *s = arg;
    s->reorders |= t->in != 0 || t->groups != 0 || t->stacked;
    /* a stacked tensor: a slice in buf, a member in tmp (no larger) */
    return st_declare(s, t->name, t->nd, t->shape, t->total,
                      t->stacked ? t->slice_n : t->total);
}

/* A stacked tensor written slice by slice: each slice's members fetched (tmp) and scattered
 * into it (buf). */
static int stream_stack(st_save *s, const hf_tensor *t)
{
    for (int64_t k = 0; k < t->slices; k++) {
        int64_t base = k * t->slice_n;
        memset(s->buf, 0, (size_t)t->slice_n * sizeof(float));
        for (int64_t j = 0; j < t->stack.members; j++) {
            const hf_member_at *m = &t->members[j];
            if (m->slice != k)
                continue;
            s->io = 0;
            NNT_TRY(nnt_tensor_to_host_f32(m->value, s->tmp, m->rows * m->cols));
            strided_copy(s->buf + (m->offset - base), m->stride[0], m->stride[1], s->tmp,
                         m->cols, 1, m->rows, m->cols);
        }
        s->io = 1;
        NNT_TRY(nnt_st_writer_write(s->w, s->buf, (size_t)t->slice_n * sizeof(float), s->err,
                                    sizeof s->err));
    }
    return NNT_OK;
}

static int stream_one(const hf_pass *ps, hf_tensor *t, void *arg)
{
    (void)ps;
    st_save *s = arg;
    s->io = 0;
    if (!st_mine(s))
        return NNT_OK;
    if (t->stacked)
        return stream_stack(s, t);
    int64_t total = t->total, at = 0;
    for (int i = 0; i < t->np; at += t->n[i], i++)
        NNT_TRY(nnt_tensor_to_host_f32(t->p[i].value, s->buf + at, t->n[i]));
    if (t->in)   /* nnt (out, in) -> Conv1D (in, out) */
        transpose(s->buf, s->tmp, total / t->in, t->in);
    if (t->groups)   /* nnt's parts -> the file's key/value heads one after the other */
        nnt_rows_by_group(s->buf, s->tmp, t->np, t->n, t->groups, 0);
    s->io = 1;
    return nnt_st_writer_write(s->w, t->in || t->groups ? s->tmp : s->buf,
                               (size_t)total * sizeof(float), s->err, sizeof s->err);
}

/* Declare every tensor under its HF name and shape (s->most: the largest). */
static int declare_all(nnt_layer *model, const char *fn, st_save *s)
{
    s->io = 0;   /* a library failure: its message is recorded already */
    return hf_each(model, fn, declare_one, s);
}

/* Stream the declared tensors. */
static int stream_all(nnt_layer *model, const char *fn, st_save *s)
{
    return hf_each(model, fn, stream_one, s);
}

int nnt_model_save_gpt2_st(nnt_layer *model, const char *fn, const char *path)
{
    return save_st(model, fn, path, declare_all, stream_all);
}

/* ---- loading ---------------------------------------------------------------------------- */

/* What a load pass reads: the weights, their file or index (messages), where they keep the
 * model's tensors (nest: NULL under the model's names), and the names of the tensors checked
 * (the unknown ones of a strict family are refused). */
typedef struct hf_reading {
    const nnt_hf_weights *w;
    const char *what;
    const nnt_hf_nesting *nest;
    char **names;
    size_t n, cap;
    int keep_score;   /* a classifier reads a language model's file: its own head stays, the
                         file's head is not read (transformers' from_pretrained so)     */
} hf_reading;

/* t is the classifier's own head that g's reading leaves as it is. */
static int keeps_head(const hf_reading *g, const hf_tensor *t)
{
    return g->keep_score && strcmp(t->name, SCORE) == 0;
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The layout of architecture a that the weights w have: the first nesting whose first
 * renamed prefix begins one of w's tensors, else the first; NULL when a has none. */
static const nnt_hf_nesting *nesting_of(const nnt_hf_arch *a, const nnt_hf_weights *w)
{
    if (!a || !a->nestings)
        return NULL;
    for (const nnt_hf_nesting *n = a->nestings; n->rename[0][0]; n++)
        for (size_t i = 0; i < nnt_hf_weights_count(w); i++)
            if (starts_with(nnt_hf_weights_name(w, i), n->rename[0][1]))
                return n;
    return a->nestings;
}

/* The file's name of the model's tensor name under nesting n (NULL: name itself), in out
 * (NNT_IO_MAXNAME + 1 bytes, cut there: a longer name is no file's) when renamed. */
static const char *nested_name(const nnt_hf_nesting *n, const char *name, char *out)
{
    for (int k = 0; n && k < 4 && n->rename[k][0]; k++) {
        size_t from = strlen(n->rename[k][0]);
        if (strncmp(name, n->rename[k][0], from) == 0) {
            snprintf(out, NNT_IO_MAXNAME + 1, "%s%s", n->rename[k][1], name + from);
            return out;
        }
    }
    return name;
}

/* The checkpoint's tensor of t (without the family's prefix too where it is optional), its
 * reader and file (r, path may be NULL); else the first of the family's other places for
 * a parameter that the file has (t then describes that tensor); NULL if absent (t as it
 * was). */
static const nnt_st_entry *find_tensor(const hf_pass *ps, const hf_reading *g, hf_tensor *t,
                                       const nnt_st_reader **r, const char **path)
{
    char nested[NNT_IO_MAXNAME + 1];
    const nnt_st_entry *e = nnt_hf_weights_find(g->w, nested_name(g->nest, t->name, nested), r,
                                                path);
    if (!e && ps->f->hf_prefix_optional && t->bare != t->name)
        e = nnt_hf_weights_find(g->w, nested_name(g->nest, t->bare, nested), r, path);
    nnt_hf_alt alt;
    for (int i = 0; !e && t->np == 1 && ps->f->hf_alt &&
                    ps->f->hf_alt(&ps->cfg, t->p[0].name, i, &alt); i++) {
        hf_tensor other = *t;
        hf_name(&other, ps->f, "", alt.name);
        if (!(e = nnt_hf_weights_find(g->w, nested_name(g->nest, other.name, nested), r, path)))
            continue;
        other.nd = alt.nd;
        memcpy(other.shape, alt.shape, sizeof other.shape);
        other.offset = alt.offset;
        *t = other;
        t->bare = t->name + (other.bare - other.name);
    }
    return e;
}

static int remember(hf_reading *g, const char *name)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        char **names = realloc(g->names, cap * sizeof *names);
        if (!names)
            return NNT_E_NOMEM;
        g->names = names;
        g->cap = cap;
    }
    if (!(g->names[g->n] = strdup(name)))
        return NNT_E_NOMEM;
    g->n++;
    return NNT_OK;
}

/* Tensor e of the file at path has nd dims shape. */
static int check_shape(const hf_pass *ps, const char *path, const nnt_st_entry *e, int nd,
                       const int64_t *shape)
{
    int same = e->ndim == nd;
    for (int d = 0; same && d < nd; d++)
        same = e->shape[d] == shape[d];
    if (!same) {
        char got[200], exp[100];
        shape_text(e->ndim, e->shape, got, sizeof got);
        shape_text(nd, shape, exp, sizeof exp);
        return nnt_fail(ps->model->ctx, NNT_E_FORMAT, "%s: %s: tensor %s has shape %s, "
                        "expected %s", ps->fn, path, e->name, got, exp);
    }
    return NNT_OK;
}

/* Tensor e of the file at path converts to F32. */
static int check_dtype(const hf_pass *ps, const char *path, const nnt_st_entry *e)
{
    if (e->dtype != NNT_IO_F32 && e->dtype != NNT_IO_BF16 && e->dtype != NNT_IO_F16)
        return nnt_fail(ps->model->ctx, NNT_E_UNSUPPORTED, "%s: %s: tensor %s is %s (F32, "
                        "BF16 or F16 only)", ps->fn, path, e->name,
                        nnt_io_dtype_name(e->dtype));
    return NNT_OK;
}

/* The checkpoint's tensor called t's name followed by suffix (without the family's prefix
 * too where it is optional), its reader and file (r, path may be NULL); NULL if absent. The
 * name looked for first (nested) in shown (NNT_IO_MAXNAME + 1 bytes). */
static const nnt_st_entry *find_suffixed(const hf_pass *ps, const hf_reading *g,
                                         const hf_tensor *t, const char *suffix,
                                         const nnt_st_reader **r, const char **path,
                                         char *shown)
{
    char name[NNT_IO_MAXNAME + 1], nested[NNT_IO_MAXNAME + 1];
    snprintf(name, sizeof name, "%s%s", t->name, suffix);
    snprintf(shown, NNT_IO_MAXNAME + 1, "%s", nested_name(g->nest, name, nested));
    const nnt_st_entry *e = nnt_hf_weights_find(g->w, shown, r, path);
    if (!e && ps->f->hf_prefix_optional && t->bare != t->name) {
        snprintf(name, sizeof name, "%s%s", t->bare, suffix);
        e = nnt_hf_weights_find(g->w, nested_name(g->nest, name, nested), r, path);
    }
    return e;
}

/* Where the file keeps stacked tensor t: the tensor itself (*e), else with mxfp4 its MXFP4
 * blocks (*b) and scales (*sc), with their readers (r: 3 of them, may be NULL) and files
 * (path: 3, may be NULL). NNT_E_FORMAT naming what is missing. */
static int find_stack(const hf_pass *ps, const hf_reading *g, const hf_tensor *t,
                      const nnt_st_entry **e, const nnt_st_entry **b, const nnt_st_entry **sc,
                      const nnt_st_reader **r, const char **path)
{
    char shown[NNT_IO_MAXNAME + 1], bname[NNT_IO_MAXNAME + 1], sname[NNT_IO_MAXNAME + 1];
    *b = *sc = NULL;
    if ((*e = find_suffixed(ps, g, t, "", r, path, shown)) || !t->stack.mxfp4) {
        if (!*e)
            return nnt_fail(ps->model->ctx, NNT_E_FORMAT, "%s: %s: no tensor %s", ps->fn,
                            g->what, shown);
        return NNT_OK;
    }
    *b = find_suffixed(ps, g, t, "_blocks", r ? r + 1 : NULL, path ? path + 1 : NULL, bname);
    *sc = find_suffixed(ps, g, t, "_scales", r ? r + 2 : NULL, path ? path + 2 : NULL, sname);
    if (!*b && !*sc)
        return nnt_fail(ps->model->ctx, NNT_E_FORMAT, "%s: %s: no tensor %s (nor its MXFP4 "
                        "form %s and %s)", ps->fn, g->what, shown, bname, sname);
    if (!*b || !*sc)
        return nnt_fail(ps->model->ctx, NNT_E_FORMAT, "%s: %s: tensor %s without %s (the "
                        "MXFP4 form of %s)", ps->fn, g->what, *b ? (*b)->name : (*sc)->name,
                        *b ? sname : bname, shown);
    return NNT_OK;
}

/* The checkpoint's stacked tensor t: convertible to F32 and of its shape, or its MXFP4
 * blocks (shape[0], shape[2], shape[1] / 32, 16) and scales (shape[0], shape[2],
 * shape[1] / 32), U8. */
static int check_stack(const hf_pass *ps, hf_reading *g, hf_tensor *t)
{
    nnt_ctx *ctx = ps->model->ctx;
    const nnt_st_entry *e, *b, *sc;
    const char *path[3] = {g->what, g->what, g->what};
    NNT_TRY(find_stack(ps, g, t, &e, &b, &sc, NULL, path));
    if (e) {
        NNT_TRY(check_dtype(ps, path[0], e));
        NNT_TRY(check_shape(ps, path[0], e, t->nd, t->shape));
    } else {
        const nnt_st_entry *both[2] = {b, sc};
        for (int k = 0; k < 2; k++)
            if (both[k]->dtype != NNT_IO_U8)
                return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: MXFP4 tensor %s is %s (U8 only)",
                                ps->fn, path[1 + k], both[k]->name,
                                nnt_io_dtype_name(both[k]->dtype));
        if (t->shape[1] % 32) {
            char stack[100];
            shape_text(t->nd, t->shape, stack, sizeof stack);
            return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: MXFP4 tensor %s: the model's %s is %s, "
                            "whose dimension 1 is no multiple of the 32 values of a block",
                            ps->fn, path[1], b->name, t->name, stack);
        }
        const int64_t bs[4] = {t->shape[0], t->shape[2], t->shape[1] / 32, 16};
        NNT_TRY(check_shape(ps, path[1], b, 4, bs));
        NNT_TRY(check_shape(ps, path[2], sc, 3, bs));
    }
    for (int k = 0; k < 3 && ps->f->hf_strict; k++) {
        const nnt_st_entry *seen = k == 0 ? e : k == 1 ? b : sc;
        if (seen && remember(g, seen->name))
            return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", ps->fn);
    }
    return NNT_OK;
}

/* The checkpoint's tensor of t: present, convertible to F32, of its HF shape. */
static int check_one(const hf_pass *ps, hf_tensor *t, void *arg)
{
    hf_reading *g = arg;
    nnt_ctx *ctx = ps->model->ctx;
    if (keeps_head(g, t))
        return NNT_OK;
    if (t->stacked)
        return check_stack(ps, g, t);
    const char *path = g->what;
    char nested[NNT_IO_MAXNAME + 1];
    const nnt_st_entry *e = find_tensor(ps, g, t, NULL, &path);
    if (!e)
        return nnt_fail(ctx, NNT_E_FORMAT, "%s: %s: no tensor %s", ps->fn, g->what,
                        nested_name(g->nest, t->name, nested));
    nnt_bnb4 q;
    int bnb4 = nnt_bnb4_find(ctx, ps->fn, g->w, e, path, &q);
    if (bnb4 < 0)
        return bnb4;
    if (bnb4) {   /* a bitsandbytes 4-bit weight: its own shape, its blocks whole */
        nnt_st_entry shaped = *e;
        shaped.ndim = q.nd;
        memcpy(shaped.shape, q.shape, sizeof shaped.shape);
        NNT_TRY(check_shape(ps, path, &shaped, t->nd, t->shape));
        if (t->offset % NNT_NF4_BLOCK || t->total % NNT_NF4_BLOCK)
            return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: %s: %s is read in parts that cut its "
                            "4-bit blocks", ps->fn, path, e->name);
    } else {
        NNT_TRY(check_dtype(ps, path, e));
        NNT_TRY(check_shape(ps, path, e, t->nd, t->shape));
    }
    if (ps->f->hf_strict && remember(g, e->name))
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", ps->fn);
    return NNT_OK;
}

/* The (checked) stacked tensor t into its members, slice by slice (an MXFP4 slice decoded
 * (shape[2], shape[1]), then transposed). */
static int fill_stack(const hf_pass *ps, hf_reading *g, hf_tensor *t)
{
    nnt_ctx *ctx = ps->model->ctx;
    const nnt_st_entry *e, *b, *sc;
    const nnt_st_reader *r[3] = {NULL, NULL, NULL};
    NNT_TRY(find_stack(ps, g, t, &e, &b, &sc, r, NULL));
    int64_t n = t->slice_n, rows = t->nd > 2 ? t->shape[2] : 1, cols = t->shape[1];
    char err[NNT_IO_ERRLEN];
    float *buf = malloc((size_t)n * sizeof(float) + 1);
    float *mbuf = malloc((size_t)t->member_most * sizeof(float) + 1);
    float *dec = e ? NULL : malloc((size_t)n * sizeof(float) + 1);
    uint8_t *raw = e ? NULL : malloc((size_t)(n / 2 + n / 32) + 1);
    int rc = buf && mbuf && (e || (dec && raw)) ? NNT_OK
                                                : nnt_fail(ctx, NNT_E_NOMEM, "%s: out of "
                                                           "memory", ps->fn);
    for (int64_t j = 0; j < t->stack.members && rc == 0; j++)   /* as fill_one */
        rc = nnt_tensor_count_first_write(t->members[j].value, ps->fn);
    for (int64_t k = 0; k < t->slices && rc == 0; k++) {
        if (e) {
            rc = nnt_st_read(r[0], e, NNT_IO_F32, (uint64_t)(k * n), (uint64_t)n, buf, err,
                             sizeof err);
        } else {
            rc = nnt_st_read(r[1], b, NNT_IO_U8, (uint64_t)(k * (n / 2)), (uint64_t)(n / 2),
                             raw, err, sizeof err);
            if (rc == 0)
                rc = nnt_st_read(r[2], sc, NNT_IO_U8, (uint64_t)(k * (n / 32)),
                                 (uint64_t)(n / 32), raw + n / 2, err, sizeof err);
            if (rc == 0) {
                nnt_mxfp4_decode(raw, raw + n / 2, rows, cols, dec);   /* (rows, cols) */
                transpose(dec, buf, rows, cols);   /* (cols, rows) */
            }
        }
        if (rc) {
            rc = nnt_fail(ctx, rc, "%s: %s", ps->fn, err);
            break;
        }
        for (int64_t j = 0; j < t->stack.members && rc == 0; j++) {
            const hf_member_at *m = &t->members[j];
            if (m->slice != k)
                continue;
            strided_copy(mbuf, m->cols, 1, buf + (m->offset - k * n), m->stride[0],
                         m->stride[1], m->rows, m->cols);
            rc = nnt_tensor_from_host_f32(m->value, mbuf, m->rows * m->cols);
        }
    }
    free(buf);
    free(mbuf);
    free(dec);
    free(raw);
    return rc;
}

/* The (checked) tensor of t into its parts, converted to fp32. */
static int fill_one(const hf_pass *ps, hf_tensor *t, void *arg)
{
    hf_reading *g = arg;
    nnt_ctx *ctx = ps->model->ctx;
    if (keeps_head(g, t))
        return NNT_OK;
    if (t->stacked)
        return fill_stack(ps, g, t);
    const nnt_st_reader *r = NULL;
    const char *path = g->what;
    const nnt_st_entry *e = find_tensor(ps, g, t, &r, &path);
    int64_t total = t->total, at = 0;
    char err[NNT_IO_ERRLEN];
    float *buf = malloc((size_t)total * sizeof(float) + 1);
    int reorder = t->in || t->groups;
    float *tmp = reorder ? malloc((size_t)total * sizeof(float) + 1) : NULL;
    int rc = buf && (tmp || !reorder) ? NNT_OK : nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory",
                                                          ps->fn);
    for (int i = 0; i < t->np && rc == 0; i++)   /* a model built unwritten counts them now */
        rc = nnt_tensor_count_first_write(t->p[i].value, ps->fn);
    nnt_bnb4 q;
    int bnb4 = rc ? 0 : nnt_bnb4_find(ctx, ps->fn, g->w, e, path, &q);
    if (bnb4 < 0)
        rc = bnb4;
    else if (bnb4)   /* dequantized as bitsandbytes does */
        rc = nnt_bnb4_read(ctx, ps->fn, path, &q, t->offset, total, reorder ? tmp : buf);
    else if (rc == 0 && (rc = nnt_st_read(r, e, NNT_IO_F32, (uint64_t)t->offset,
                                          (uint64_t)total, reorder ? tmp : buf, err,
                                          sizeof err)))
        rc = nnt_fail(ctx, rc, "%s: %s", ps->fn, err);
    if (rc == 0 && t->in)   /* Conv1D (in, out) -> nnt (out, in) */
        transpose(tmp, buf, t->in, total / t->in);
    if (rc == 0 && t->groups)   /* the file's key/value heads one after the other -> nnt's parts */
        nnt_rows_by_group(tmp, buf, t->np, t->n, t->groups, 1);
    for (int i = 0; i < t->np && rc == 0; at += t->n[i], i++)
        rc = nnt_tensor_from_host_f32(t->p[i].value, buf + at, t->n[i]);
    free(buf);
    free(tmp);
    return rc;
}

/* A tensor of the file that is no parameter: the tied head, a buffer HF saves (and those the
 * family names), or what a nesting skips (a vision tower). */
static int ignorable(const hf_reading *g, const nnt_family *f, const char *name, int tied)
{
    char head[NNT_IO_MAXNAME + 1];
    if (tied && strcmp(name, nested_name(g->nest, "lm_head.weight", head)) == 0)
        return 1;
    if (g->keep_score &&   /* a language model's head (GPT-NeoX's embed_out) */
        (ends_with(name, "lm_head.weight") || ends_with(name, "lm_head.bias") ||
         ends_with(name, "embed_out.weight")))
        return 1;
    for (const char *const *end = f->hf_ignored; end && *end; end++)
        if (ends_with(name, *end))
            return 1;
    for (int k = 0; g->nest && k < 4 && g->nest->skip[k]; k++)
        if (starts_with(name, g->nest->skip[k]))
            return 1;
    return ends_with(name, "rotary_emb.inv_freq");
}

/* A strict family's file holds no tensor that is not one of the model's. */
static int check_unknown(nnt_layer *model, const char *fn, const hf_reading *g,
                         const nnt_model_config *cfg)
{
    const nnt_family *f = nnt_family_find(cfg->family);
    for (size_t i = 0; i < nnt_hf_weights_count(g->w); i++) {
        const char *name = nnt_hf_weights_name(g->w, i), *file = g->what;
        int known = ignorable(g, f, name, cfg->tied);
        for (size_t k = 0; k < g->n && !known; k++)   /* a 4-bit weight's companions too */
            known = strcmp(g->names[k], name) == 0 || nnt_bnb4_companion(g->names[k], name);
        if (known)
            continue;
        nnt_hf_weights_find(g->w, name, NULL, &file);
        return nnt_fail(model->ctx, NNT_E_FORMAT, "%s: %s: unknown tensor %s (no parameter "
                        "of the model has that name)", fn, file, name);
    }
    return NNT_OK;
}

/* The weights w (what: their file or index) of architecture arch (NULL: the model's names)
 * into model, of configuration cfg: every tensor checked before any is read. */
static int read_weights(nnt_layer *model, const char *fn, const nnt_hf_weights *w,
                        const char *what, const nnt_hf_arch *arch, const nnt_model_config *cfg,
                        int keep_score)
{
    hf_reading g = {w, what, nesting_of(arch, w), NULL, 0, 0, keep_score};
    int rc = hf_each(model, fn, check_one, &g);
    if (rc == 0 && nnt_family_find(cfg->family)->hf_strict)
        rc = check_unknown(model, fn, &g, cfg);
    if (rc == 0)
        rc = hf_each(model, fn, fill_one, &g);
    for (size_t i = 0; i < g.n; i++)
        free(g.names[i]);
    free(g.names);
    return rc;
}

/* A model of cfg (tree: the bare tree; else what nnt_model_create makes) from the weights w
 * (read_weights). */
static int load_weights(nnt_ctx *ctx, const char *fn, const nnt_hf_weights *w,
                        const char *what, const nnt_hf_arch *arch,
                        const nnt_model_config *cfg, int64_t B, int64_t T,
                        const nnt_tiling *tiling, int tree, nnt_layer **out)
{
    nnt_layer *model = NULL;
    int rc = tree ? nnt_model_build_tree(ctx, fn, cfg, B, T, tiling, &model)
                  : nnt_model_build(ctx, fn, cfg, B, T, tiling, &model);
    if (rc == 0)
        rc = read_weights(model, fn, w, what, arch, cfg, 0);
    if (rc) {
        nnt_layer_destroy(model);
        return rc;
    }
    *out = model;
    return NNT_OK;
}

int nnt_model_load_gpt2_st(nnt_ctx *ctx, const char *fn, const char *path,
                           const nnt_model_config *cfg, int64_t B, int64_t T,
                           const nnt_tiling *tiling, int tree, nnt_layer **out)
{
    nnt_hf_weights *w = NULL;
    NNT_TRY(nnt_hf_weights_open_file(ctx, fn, path, &w));
    int rc = load_weights(ctx, fn, w, path, NULL, cfg, B, T, tiling, tree, out);
    nnt_hf_weights_close(w);
    return rc;
}

/* nnt_model_load_hf (tree 0: what nnt_model_create makes, e.g. GPT-2's GPT layer) or nnt_model_load_hf_tree. */
static int load_hf(nnt_ctx *ctx, const char *fn, const char *dir, int64_t B, int64_t T,
                   const nnt_tiling *tiling, int tree, nnt_layer **out)
{
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!dir)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: dir is NULL", fn);
    nnt_model_config cfg;
    const nnt_hf_arch *arch = NULL;
    nnt_hf_weights *w = NULL;
    NNT_TRY(nnt_model_config_read_dir(ctx, fn, dir, &cfg, &arch));
    NNT_TRY(nnt_hf_weights_open(ctx, fn, dir, &w));
    const char *what = nnt_hf_weights_source(w);   /* a missing tensor's messages name it */
    int rc = load_weights(ctx, fn, w, what, arch, &cfg, B, T, tiling, tree, out);
    nnt_hf_weights_close(w);
    if (rc == 0 && cfg.num_labels > 0 &&   /* a classifier's label names (id2label) */
        (rc = nnt_model_label_names_load(*out, fn, dir, NULL, 0))) {
        nnt_layer_destroy(*out);
        *out = NULL;
    }
    return rc;
}

NNT_API int nnt_model_load_hf(nnt_ctx *ctx, const char *dir, int64_t B, int64_t T,
                              const nnt_tiling *tiling, nnt_layer **out)
{
    return load_hf(ctx, "nnt_model_load_hf", dir, B, T, tiling, 0, out);
}

int nnt_model_load_hf_tree(nnt_ctx *ctx, const char *dir, int64_t B, int64_t T,
                           const nnt_tiling *tiling, nnt_layer **out)
{
    return load_hf(ctx, "nnt_model_load_hf_tree", dir, B, T, tiling, 1, out);
}

/* The configuration dir's config.json gives (file) is the model's (have), in every size and
 * in what the computation uses; the first difference named. */
static int same_config(nnt_ctx *ctx, const char *fn, const char *dir,
                       const nnt_model_config *file, const nnt_model_config *have)
{
    nnt_model_config f = *file;
    if (f.kv_heads == 0)
        f.kv_heads = f.heads;
    double fp = f.rope.partial_rotary_factor, hp = have->rope.partial_rotary_factor;
    int scaled = f.rope.scaling != NNT_ROPE_SCALING_NONE;   /* its fields count */
    double fm[4], hm[4];   /* Granite's multipliers as applied */
    nnt_model_multipliers(&f, fm);
    nnt_model_multipliers(have, hm);
    const struct { const char *name; double file, have; } sizes[] = {
        {"family", f.family, have->family}, {"vocab", (double)f.vocab, (double)have->vocab},
        {"layers", (double)f.layers, (double)have->layers},
        {"heads", (double)f.heads, (double)have->heads},
        {"kv_heads", (double)f.kv_heads, (double)have->kv_heads},
        {"channels", (double)f.channels, (double)have->channels},
        {"tied", f.tied, have->tied}, {"num_labels", (double)f.num_labels,
                                        (double)have->num_labels},
        {"qk_norm", f.qk_norm, have->qk_norm},
        {"experts", (double)f.experts, (double)have->experts},
        {"serial_blocks", f.serial_blocks, have->serial_blocks},
        {"two norms a block (parallel_norms 2)", f.parallel_norms == 2,
         have->parallel_norms == 2},
        {"exact GELU (mlp_gelu)", nnt_model_mlp_kind(&f) == NNT_MLP_GELU_ERF,
         nnt_model_mlp_kind(have) == NNT_MLP_GELU_ERF},
        {"norm_eps", f.norm_eps, have->norm_eps}, {"rope theta", f.rope.theta, have->rope.theta},
        {"rope scaling", f.rope.scaling, have->rope.scaling},
        {"sliding_window", (double)f.sliding_window, (double)have->sliding_window},
        {"attn_softcap", f.attn_softcap, have->attn_softcap},
        {"final_softcap", f.final_softcap, have->final_softcap},
        {"query_pre_attn_scalar", f.query_pre_attn_scalar, have->query_pre_attn_scalar},
        {"rope_local_theta", f.rope_local_theta, have->rope_local_theta},
        {"rope partial_rotary_factor", fp == 0.0 ? 1.0 : fp, hp == 0.0 ? 1.0 : hp},
        {"rope factor", scaled ? f.rope.factor : 0.0, scaled ? have->rope.factor : 0.0},
        {"rope original_max_position", scaled ? (double)f.rope.original_max_position : 0.0,
         scaled ? (double)have->rope.original_max_position : 0.0},
        {"rope attention_factor", f.rope.attention_factor, have->rope.attention_factor},
        {"attn_sinks", f.attn_sinks, have->attn_sinks}, {"moe_bias", f.moe_bias, have->moe_bias},
        {"swiglu_limit", f.swiglu_limit, have->swiglu_limit},
        {"swiglu_alpha", f.swiglu_alpha, have->swiglu_alpha},
        {"embedding_multiplier", fm[0], hm[0]}, {"residual_multiplier", fm[1], hm[1]},
        {"attention_multiplier", fm[2], hm[2]}, {"logits_scaling", fm[3], hm[3]},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].file != sizes[i].have)
            return nnt_fail(ctx, i < 10 ? NNT_E_SHAPE : NNT_E_INVAL, "%s: %s/config.json has %s "
                            "%g, the model %g", fn, dir, sizes[i].name, sizes[i].file,
                            sizes[i].have);
    if (f.rope.scaling == NNT_ROPE_SCALING_LONGROPE &&
        (f.rope.nfactors != have->rope.nfactors ||
         memcmp(f.rope.short_factor, have->rope.short_factor, sizeof f.rope.short_factor) ||
         memcmp(f.rope.long_factor, have->rope.long_factor, sizeof f.rope.long_factor)))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: %s/config.json has other longrope factors than "
                        "the model", fn, dir);
    return NNT_OK;
}

NNT_API int nnt_model_read_hf(nnt_layer *model, const char *dir)
{
    const char *fn = "nnt_model_read_hf";
    NNT_TRY(nnt_layer_check(model, fn));
    if (!dir)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: dir is NULL", fn);
    nnt_model_config have, file;
    const nnt_hf_arch *arch = NULL;
    nnt_hf_weights *w = NULL;
    NNT_TRY(nnt_model_config_get(model, fn, &have));
    NNT_TRY(nnt_model_config_read_dir(model->ctx, fn, dir, &file, &arch));
    int keep_score = file.num_labels == 0 && have.num_labels > 0;
    if (keep_score)   /* a language model's weights under a classifier's head */
        file.num_labels = have.num_labels, file.tied = have.tied;
    NNT_TRY(same_config(model->ctx, fn, dir, &file, &have));
    NNT_TRY(nnt_hf_weights_open(model->ctx, fn, dir, &w));
    int rc = read_weights(model, fn, w, nnt_hf_weights_source(w), arch, &have, keep_score);
    nnt_hf_weights_close(w);
    if (rc == 0 && !keep_score)   /* a classifier's: its label names too */
        rc = nnt_model_label_names_load(model, fn, dir, NULL, 0);
    return rc;
}

/* ---- saving a directory ------------------------------------------------------------------ */

static int make_dir(nnt_ctx *ctx, const char *fn, const char *dir)
{
    struct stat st;
    if (!nnt_io_writes())
        return NNT_OK;   /* rank > 0 of an MPI job: rank 0 creates it */
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return nnt_fail(ctx, NNT_E_IO, "%s: cannot create directory %s: %s", fn, dir,
                        strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return nnt_fail(ctx, NNT_E_IO, "%s: %s is not a directory", fn, dir);
    return NNT_OK;
}

/* A lib/io or hf_shards failure (message in err) recorded under fn. */
static int io_fail(nnt_ctx *ctx, const char *fn, int rc, const char *err)
{
    return rc ? nnt_fail(ctx, rc, "%s: %s", fn, err) : NNT_OK;
}

/* dir/model.safetensors, then what an earlier sharded save left removed. */
static int save_single(nnt_layer *model, const char *fn, const char *dir, st_pass declare,
                       st_pass stream)
{
    char path[NNT_MODEL_PATH_MAX], err[NNT_IO_ERRLEN];
    NNT_TRY(nnt_model_path_join(model->ctx, fn, dir, NNT_HF_SINGLE, path));
    NNT_TRY(save_st(model, fn, path, declare, stream));
    return io_fail(model->ctx, fn, nnt_hf_remove_stale(dir, 0, err, sizeof err), err);
}

/* The shards of plan (split), then the index, then what an earlier save left removed. The
 * old index goes first: a save interrupted midway leaves shards without an index (which
 * does not load) rather than an index over a mix of old and new shards. */
static int save_sharded(nnt_layer *model, const char *fn, const char *dir, st_pass declare,
                        st_pass stream, const nnt_hf_plan *plan)
{
    char path[NNT_MODEL_PATH_MAX], err[NNT_IO_ERRLEN], name[64];
    NNT_TRY(io_fail(model->ctx, fn, nnt_hf_remove_index(dir, err, sizeof err), err));
    size_t lo = 0;
    for (int k = 0; k < plan->nshards; k++) {
        size_t hi = lo;
        while (hi < plan->n && plan->shard[hi] == k)
            hi++;
        nnt_hf_shard_name(k, plan->nshards, name, sizeof name);
        NNT_TRY(nnt_model_path_join(model->ctx, fn, dir, name, path));
        NNT_TRY(save_st_range(model, fn, path, declare, stream, (int64_t)lo, (int64_t)hi));
        lo = hi;
    }
    NNT_TRY(nnt_model_path_join(model->ctx, fn, dir, NNT_HF_INDEX, path));
    NNT_TRY(io_fail(model->ctx, fn, nnt_hf_index_write(plan, path, err, sizeof err), err));
    return io_fail(model->ctx, fn, nnt_hf_remove_stale(dir, plan->nshards, err, sizeof err),
                   err);
}

/* The weights: one file (max_bytes 0, or all fit), else shards of <= max_bytes of data. */
static int save_weights(nnt_layer *model, const char *fn, const char *dir, uint64_t max_bytes)
{
    st_pass declare = declare_all, stream = stream_all;
    if (max_bytes == 0)
        return save_single(model, fn, dir, declare, stream);
    char err[NNT_IO_ERRLEN];
    nnt_hf_plan plan;
    memset(&plan, 0, sizeof plan);
    int rc = plan_tensors(model, fn, declare, &plan);
    if (rc == 0)
        rc = io_fail(model->ctx, fn, nnt_hf_plan_split(&plan, max_bytes, err, sizeof err), err);
    if (rc == 0)
        rc = plan.nshards == 1 ? save_single(model, fn, dir, declare, stream)
                               : save_sharded(model, fn, dir, declare, stream, &plan);
    nnt_hf_plan_free(&plan);
    return rc;
}

/* src copied to dst through a temporary file (fsync, rename), unless they are one file. */
static int copy_file(nnt_ctx *ctx, const char *fn, const char *src, const char *dst)
{
    char err[NNT_IO_ERRLEN], buf[1 << 16];
    struct stat ss, ds;
    if (stat(src, &ss) == 0 && stat(dst, &ds) == 0 && ss.st_dev == ds.st_dev &&
        ss.st_ino == ds.st_ino)
        return NNT_OK;   /* dir is where the file is */
    int fd = -1;
    uint64_t size = 0;
    nnt_io_out *o = NULL;
    int rc = nnt_io_open_read(src, &fd, &size, err, sizeof err);
    if (rc == 0)
        rc = nnt_io_out_begin(dst, &o, err, sizeof err);
    for (uint64_t off = 0, n; rc == 0 && off < size; off += n) {
        n = size - off < sizeof buf ? size - off : sizeof buf;
        rc = nnt_io_pread(fd, buf, (size_t)n, off, src, err, sizeof err);
        if (rc == 0)
            rc = nnt_io_out_write(o, buf, (size_t)n, err, sizeof err);
    }
    if (fd >= 0)
        close(fd);
    if (rc == 0)
        rc = nnt_io_out_commit(o, err, sizeof err);
    else
        nnt_io_out_abort(o);
    return io_fail(ctx, fn, rc, err);
}

/* The files transformers reads beside tokenizer.json: the tokenizer's class, special tokens
 * and chat template, and the generation defaults (eos ids). */
static const char *const TOKENIZER_FILES[] = {"tokenizer_config.json", "chat_template.jinja",
                                              "special_tokens_map.json",
                                              "generation_config.json"};

/* from (a tokenizer.json, or a directory holding one) copied to dir/tokenizer.json, and when
 * it is a model directory's (a directory, or a file named tokenizer.json) the files of
 * TOKENIZER_FILES beside it: those present copied, those absent removed from dir (they
 * would belong to another tokenizer: transformers reads chat_template.jinja before
 * tokenizer_config.json's template). */
static int copy_tokenizer(nnt_ctx *ctx, const char *fn, const char *from, const char *dir)
{
    char src[NNT_MODEL_PATH_MAX], dst[NNT_MODEL_PATH_MAX], from_dir[NNT_MODEL_PATH_MAX];
    struct stat ss;
    const char *base = strrchr(from, '/');
    base = base ? base + 1 : from;
    int whole = 1;   /* a model directory's tokenizer */
    if (stat(from, &ss) == 0 && S_ISDIR(ss.st_mode)) {
        NNT_TRY(nnt_model_path_join(ctx, fn, from, "tokenizer.json", src));
        snprintf(from_dir, sizeof from_dir, "%s", from);
    } else if ((size_t)snprintf(src, sizeof src, "%s", from) >= sizeof src) {
        return nnt_fail(ctx, NNT_E_INVAL, "%s: tokenizer_json: the path is too long", fn);
    } else {
        whole = strcmp(base, "tokenizer.json") == 0;
        snprintf(from_dir, sizeof from_dir, "%.*s", base > from ? (int)(base - from) : 1,
                 base > from ? from : ".");
    }
    NNT_TRY(nnt_model_path_join(ctx, fn, dir, "tokenizer.json", dst));
    NNT_TRY(copy_file(ctx, fn, src, dst));
    for (size_t i = 0; whole && i < sizeof TOKENIZER_FILES / sizeof TOKENIZER_FILES[0]; i++) {
        NNT_TRY(nnt_model_path_join(ctx, fn, from_dir, TOKENIZER_FILES[i], src));
        NNT_TRY(nnt_model_path_join(ctx, fn, dir, TOKENIZER_FILES[i], dst));
        if (stat(src, &ss) == 0)
            NNT_TRY(copy_file(ctx, fn, src, dst));
        else if (unlink(dst) != 0 && errno != ENOENT)
            return nnt_fail(ctx, NNT_E_IO, "%s: %s: cannot remove it (%s): it belongs to "
                            "another tokenizer than %s", fn, dst, strerror(errno), from);
    }
    return NNT_OK;
}

static int save_hf(nnt_layer *model, const char *fn, const char *dir,
                   const nnt_hf_save_options *opts)
{
    nnt_model_config cfg;
    NNT_TRY(nnt_model_config_get(model, fn, &cfg));
    if (!dir)
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: dir is NULL", fn);
    if (opts && opts->size < sizeof(nnt_hf_save_options))
        return nnt_fail(model->ctx, NNT_E_INVAL, "%s: options size %zu is below "
                        "sizeof(nnt_hf_save_options) %zu (use NNT_HF_SAVE_OPTIONS_INIT)", fn,
                        opts->size, sizeof(nnt_hf_save_options));
    const nnt_family *f = NULL;   /* refused before anything is written if none has cfg */
    int arch = nnt_model_hf_arch(model->ctx, fn, &cfg, &f);
    if (arch < 0)
        return arch;
    NNT_TRY(make_dir(model->ctx, fn, dir));
    /* the weights first: config.json, written last, says what they are */
    NNT_TRY(save_weights(model, fn, dir, opts ? opts->max_shard_bytes : 0));
    if (opts && opts->tokenizer_json)
        NNT_TRY(copy_tokenizer(model->ctx, fn, opts->tokenizer_json, dir));
    return nnt_model_config_write_dir(model->ctx, fn, dir, &cfg,
                                      nnt_model_label_names_of(model));
}

NNT_API int nnt_model_save_hf(nnt_layer *model, const char *dir)
{
    const char *fn = "nnt_model_save_hf";
    return model ? nnt_mpi_saved(model->ctx, save_hf(model, fn, dir, NULL), fn, dir)
                 : save_hf(model, fn, dir, NULL);
}

NNT_API int nnt_model_save_hf_ex(nnt_layer *model, const char *dir,
                                 const nnt_hf_save_options *opts)
{
    const char *fn = "nnt_model_save_hf_ex";
    return model ? nnt_mpi_saved(model->ctx, save_hf(model, fn, dir, opts), fn, dir)
                 : save_hf(model, fn, dir, opts);
}
