/* SPDX-License-Identifier: MIT */
/* The layer framework: the public functions that work on any nnt_layer, and the helpers
 * the kinds build on (lib/layers/layer.h). */
#include "layer.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define GPT2_INIT_STD 0.02

/* ---- helpers for the kinds ----------------------------------------------------------- */

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int nnt_layer_check(const nnt_layer *l, const char *fn)
{
    if (!l)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: layer is NULL", fn);
    if (l->magic != NNT_LAYER_MAGIC)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: not a live layer (destroyed?)", fn);
    return nnt_ctx_check(l->ctx, fn);
}

int nnt_layer_new(nnt_ctx *ctx, const nnt_layer_vt *vt, size_t impl_size, const char *fn,
                  nnt_layer **out)
{
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    int rc = nnt_ctx_check(ctx, fn);
    if (rc)
        return rc;
    nnt_layer *l = calloc(1, sizeof *l);
    void *impl = impl_size ? calloc(1, impl_size) : NULL;
    if (!l || (impl_size && !impl)) {
        free(l);
        free(impl);
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    }
    l->magic = NNT_LAYER_MAGIC;
    l->vt = vt;
    l->ctx = ctx;
    l->impl = impl;
    l->create_fn = fn;
    *out = l;
    return NNT_OK;
}

int nnt_layer_add_param(nnt_layer *l, const char *name, nnt_tensor *value, nnt_tensor *grad,
                        int decay, nnt_init_rule init, int owned)
{
    nnt_layer_param_rec *grown = realloc(l->params, (size_t)(l->nparams + 1) * sizeof *grown);
    char *copy = dup_string(name);
    if (!grown || !copy) {
        free(copy);
        if (grown)
            l->params = grown;
        return nnt_fail(l->ctx, NNT_E_NOMEM, "nnt_layer: out of memory adding %s", name);
    }
    l->params = grown;
    nnt_layer_param_rec *p = &l->params[l->nparams++];
    p->name = copy;
    p->value = value;
    p->grad = grad;
    p->decay = decay;
    p->init = init;
    p->owned = owned;
    p->grad_dropped = 0;
    p->frozen = 0;
    p->adapter = 0;
    p->products_only = 0;
    p->keep_fp32 = 0;
    p->nf4 = 0;
    p->output_head = 0;
    return NNT_OK;
}

int nnt_layer_new_param(nnt_layer *l, const char *name, int ndim, const int64_t *shape,
                        const int64_t *tile, int decay, nnt_init_rule init,
                        nnt_tensor **value, nnt_tensor **grad)
{
    nnt_tensor *v = NULL, *g = NULL;
    /* A kind that drops every gradient of its own (clear_grad nnt_layer_drop_grads: linear
     * maps, attention) writes each one first with beta 0: no zero-fill now, so nothing is
     * allocated, nor counted in the budget, until a backward writes it (a frozen matrix's
     * never is); others start from zeros. */
    int dropped = l->vt->clear_grad == nnt_layer_drop_grads;
    /* a model built unwritten (nnt_model_build_uninit) counts each value at its first write
     * or conversion: a base frozen in bf16 is counted in bf16, never its fp32 size */
    int rc = nnt_tensor_create_param(l->ctx, ndim, shape, tile, l->ctx->defer_init > 0, &v);
    if (!rc)
        /* a weight gradient travels through the ranks of its rows under NNT_DIST_DATA;
         * otherwise its tasks (products, sums, the norm's partials, the update) run on
         * its owner */
        rc = nnt_tensor_create_beside(l->ctx, NNT_FP32, ndim, shape, tile, v,
                                      (l->ctx->distribution != NNT_DIST_DATA
                                           ? NNT_HELD_STAYS : NNT_HELD_ANYWHERE) |
                                      (dropped ? NNT_HELD_DEFERRED : 0),
                                      &g);
    if (!rc)
        nnt_tensor_set_kind(g, NNT_MEM_GRADIENTS);
    if (!rc && !dropped)
        rc = nnt_tensor_fill(g, 0.0);
    if (!rc)
        rc = nnt_layer_add_param(l, name, v, g, decay, init, 1);
    if (!rc && dropped)
        l->params[l->nparams - 1].grad_dropped = 1;
    if (rc) {
        nnt_tensor_destroy(v);
        nnt_tensor_destroy(g);
        return rc;
    }
    if (value)
        *value = v;
    if (grad)
        *grad = g;
    return NNT_OK;
}

int nnt_layer_add_child(nnt_layer *l, const char *name, nnt_layer *child)
{
    nnt_layer **kids = realloc(l->children, (size_t)(l->nchildren + 1) * sizeof *kids);
    if (kids)
        l->children = kids;
    char **names = realloc(l->child_names, (size_t)(l->nchildren + 1) * sizeof *names);
    if (names)
        l->child_names = names;
    char *copy = dup_string(name);
    if (!kids || !names || !copy) {
        free(copy);
        return nnt_fail(l->ctx, NNT_E_NOMEM, "nnt_layer: out of memory adding child %s", name);
    }
    l->children[l->nchildren] = child;
    l->child_names[l->nchildren] = copy;
    l->nchildren++;
    child->parent = l;
    return NNT_OK;
}

static int same_layout(nnt_tensor *t, nnt_dtype dtype, int ndim, const int64_t *shape,
                       const int64_t *tile)
{
    nnt_dtype have_dtype;
    int have_ndim;
    int64_t have_shape[NNT_MAX_DIMS], have_tile[NNT_MAX_DIMS];
    if (nnt_tensor_dtype(t, &have_dtype) || nnt_tensor_ndim(t, &have_ndim) ||
        nnt_tensor_shape(t, have_shape) || nnt_tensor_tile_shape(t, have_tile))
        return 0;
    if (have_dtype != dtype || have_ndim != ndim)
        return 0;
    for (int d = 0; d < ndim; d++) {
        int64_t want_tile = tile[d] < shape[d] ? tile[d] : shape[d];  /* clamped */
        if (have_shape[d] != shape[d] || have_tile[d] != want_tile)
            return 0;
    }
    return 1;
}

/* Remember t among l's activations (once). */
static int track_activation(nnt_layer *l, nnt_tensor **t)
{
    for (int i = 0; i < l->nacts; i++)
        if (l->acts[i] == t)
            return NNT_OK;
    if (l->nacts == l->cap_acts) {
        int cap = l->cap_acts ? 2 * l->cap_acts : 8;
        nnt_tensor ***grown = realloc(l->acts, (size_t)cap * sizeof *grown);
        if (!grown)
            return nnt_fail(l->ctx, NNT_E_NOMEM, "%s: out of memory", l->vt->kind_name);
        l->acts = grown;
        l->cap_acts = cap;
    }
    l->acts[l->nacts++] = t;
    return NNT_OK;
}

void nnt_layer_drop_activations(nnt_layer *l, const nnt_tensor *keep,
                                const nnt_tensor *keep2)
{
    for (int i = 0; i < l->nacts; i++) {
        if (*l->acts[i] && *l->acts[i] != keep && *l->acts[i] != keep2) {
            nnt_temp_release(*l->acts[i]);
            *l->acts[i] = NULL;
        }
    }
    for (int c = 0; c < l->nchildren; c++)
        nnt_layer_drop_activations(l->children[c], keep, keep2);
}

void nnt_layer_drop_weight_copies(nnt_layer *l)
{
    for (int i = 0; i < l->nweight_reads; i++) {
        nnt_tensor **copy = l->weight_reads[i].copy;
        nnt_temp_release(*copy);
        *copy = NULL;
    }
    for (int c = 0; c < l->nchildren; c++)
        nnt_layer_drop_weight_copies(l->children[c]);
}

int nnt_layer_ensure_placed(nnt_layer *l, nnt_tensor **t, nnt_dtype dtype, int ndim,
                            const int64_t *shape, const int64_t *tile, unsigned rows)
{
    NNT_TRY(track_activation(l, t));
    if (*t && same_layout(*t, dtype, ndim, shape, tile) &&
        (*t)->rows == nnt_rows_hint(rows, ndim))
        return NNT_OK;
    nnt_tensor_destroy(*t);
    *t = NULL;
    return nnt_tensor_create_placed(l->ctx, dtype, ndim, shape, tile, rows, t);
}

int nnt_layer_ensure_beside(nnt_layer *l, nnt_tensor **t, nnt_dtype dtype,
                            const nnt_tensor *beside)
{
    if (*t && same_layout(*t, dtype, beside->ndim, beside->shape, beside->tile) &&
        (*t)->place_seq == beside->place_seq)
        return NNT_OK;
    nnt_tensor_destroy(*t);
    *t = NULL;
    NNT_TRY(nnt_tensor_create_beside(l->ctx, dtype, beside->ndim, beside->shape, beside->tile,
                                     beside, beside->released ? NNT_HELD_RELEASED
                                                              : NNT_HELD_ANYWHERE, t));
    nnt_tensor_set_kind(*t, beside->kind);   /* a weight's copy moves as weights */
    return NNT_OK;
}

int nnt_layer_ensure(nnt_layer *l, nnt_tensor **t, nnt_dtype dtype, int ndim,
                     const int64_t *shape, const int64_t *tile)
{
    return nnt_layer_ensure_placed(l, t, dtype, ndim, shape, tile, NNT_ROWS_BT);
}

/* ---- tree queries ------------------------------------------------------------------------ */

NNT_API int nnt_layer_kind_of(const nnt_layer *layer, nnt_layer_kind *kind)
{
    int rc = nnt_layer_check(layer, "nnt_layer_kind_of");
    if (rc)
        return rc;
    if (!kind)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "nnt_layer_kind_of: kind is NULL");
    *kind = layer->vt->kind;
    return NNT_OK;
}

NNT_API int nnt_layer_num_children(const nnt_layer *layer, int *n)
{
    int rc = nnt_layer_check(layer, "nnt_layer_num_children");
    if (rc)
        return rc;
    if (!n)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "nnt_layer_num_children: n is NULL");
    *n = layer->nchildren;
    return NNT_OK;
}

NNT_API int nnt_layer_child(nnt_layer *layer, int i, nnt_layer **child)
{
    int rc = nnt_layer_check(layer, "nnt_layer_child");
    if (rc)
        return rc;
    if (!child)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "nnt_layer_child: child is NULL");
    if (i < 0 || i >= layer->nchildren)
        return nnt_fail(layer->ctx, NNT_E_INVAL,
                        "nnt_layer_child: index %d outside [0, %d) (a %s layer)", i,
                        layer->nchildren, layer->vt->kind_name);
    *child = layer->children[i];
    return NNT_OK;
}

/* ---- targets, forward, loss, backward ----------------------------------------------------- */

static nnt_layer *last_child(const nnt_layer *l)
{
    return l->nchildren > 0 ? l->children[l->nchildren - 1] : NULL;
}

static int has_targets(const nnt_layer *l)
{
    if (l->vt->has_targets)
        return l->vt->has_targets(l);
    const nnt_layer *last = last_child(l);
    return last ? has_targets(last) : 0;
}

NNT_API int nnt_layer_set_targets(nnt_layer *layer, nnt_tensor *targets)
{
    int rc = nnt_layer_check(layer, "nnt_layer_set_targets");
    if (rc)
        return rc;
    if (layer->vt->set_targets)
        return layer->vt->set_targets(layer, targets);
    nnt_layer *last = last_child(layer);
    if (!last)
        return nnt_fail(layer->ctx, NNT_E_INVAL,
                        "nnt_layer_set_targets: a %s layer computes no loss (targets go to a "
                        "cross-entropy layer, a sequential ending with one, or a GPT)",
                        layer->vt->kind_name);
    return nnt_layer_set_targets(last, targets);
}

__thread double nnt_layer_targets_divisor;

NNT_API int nnt_layer_set_targets_ex(nnt_layer *layer, nnt_tensor *targets, double divisor)
{
    int rc = nnt_layer_check(layer, "nnt_layer_set_targets_ex");
    if (rc)
        return rc;
    if (!(divisor >= 0) || divisor > 1e300)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "nnt_layer_set_targets_ex: divisor %g (>= 0; "
                        "0: the number of counted targets)", divisor);
    nnt_layer_targets_divisor = divisor;
    rc = nnt_layer_set_targets(layer, targets);
    nnt_layer_targets_divisor = 0;
    return rc;
}

NNT_API int nnt_layer_set_positions(nnt_layer *layer, nnt_tensor *positions)
{
    static const char fn[] = "nnt_layer_set_positions";
    NNT_TRY(nnt_layer_check(layer, fn));
    if (positions) {
        NNT_TRY(nnt_check_arg(fn, "positions", positions, NNT_INT32, 1));
        if (positions->ndim != 2)
            return nnt_fail(layer->ctx, NNT_E_SHAPE, "%s: positions must have 2 dimensions "
                            "(B, T), not %d", fn, positions->ndim);
    }
    layer->positions = positions;
    /* a layer that runs another tree (the GPT layer): that tree's forwards use them too */
    nnt_layer *inner = layer->vt->inner ? layer->vt->inner(layer) : NULL;
    if (inner && inner != layer)
        inner->positions = positions;
    return NNT_OK;
}

nnt_tensor *nnt_layer_positions_of(const nnt_layer *l)
{
    for (; l; l = l->parent)
        if (l->positions)
            return l->positions;
    return NULL;
}

/* ---- releasing received weights ---------------------------------------------------------- */

/* Not while a generation runs on rank 0 (weights_fixed, the root distribution: rank 0 was
 * found to have the memory for every weight, which then comes once for all tokens). A
 * generation spread over the ranks (not enough memory for that) goes on releasing. */
static int releasing(const nnt_ctx *ctx)
{
    return ctx->release_weights &&
           !(ctx->weights_fixed && ctx->distribution == NNT_DIST_ROOT);
}

int nnt_layer_note_weight_read(nnt_layer *l, nnt_tensor *w, nnt_tensor **copy)
{
    nnt_layer_param_rec *own = nnt_layer_own_param(l, w);
    if (own)   /* its own weight, which only its products read */
        own->products_only = 1;
    for (int i = 0; i < l->nweight_reads; i++)
        if (l->weight_reads[i].copy == copy) {
            l->weight_reads[i].weight = w;
            return NNT_OK;
        }
    if (l->nweight_reads == NNT_LAYER_MAX_WEIGHT_READS)
        return nnt_fail(l->ctx, NNT_E_RUNTIME, "a %s layer reads more than %d weights "
                        "(internal limit)", l->vt->kind_name, NNT_LAYER_MAX_WEIGHT_READS);
    l->weight_reads[l->nweight_reads].weight = w;
    l->weight_reads[l->nweight_reads].copy = copy;
    l->nweight_reads++;
    return NNT_OK;
}

static int is_own_param(const nnt_layer *l, const nnt_tensor *t)
{
    for (int i = 0; i < l->nparams; i++)
        if (l->params[i].value == t)
            return 1;
    return 0;
}

void nnt_layer_release_weights(nnt_layer *l)
{
    if (!releasing(l->ctx))
        return;
    for (int i = 0; i < l->nparams; i++)
        nnt_tensor_forget_copies(l->params[i].value);
    for (int i = 0; i < l->nweight_reads; i++) {
        if (!is_own_param(l, l->weight_reads[i].weight))
            nnt_tensor_forget_copies(l->weight_reads[i].weight);
        nnt_tensor_forget_copies(*l->weight_reads[i].copy);
    }
}

int nnt_layer_release_window(nnt_layer *l, nnt_tensor *prev_input)
{
    if (!prev_input || !releasing(l->ctx))
        return NNT_OK;
    /* every rank, those holding none of its rows included: they would otherwise submit
     * (and send their weights for) every child at once, which the receiving ranks would
     * hold as early data */
    return nnt_tensor_wait_computed(prev_input);
}

/* Bytes of the weights l's subtree reads: its parameters, the other layers' weights its
 * products read (a tied table), and the bf16 copies of the weights its products read. */
static int64_t weight_bytes(const nnt_layer *l, int bf16)
{
    int64_t bytes = 0;
    for (int i = 0; i < l->nparams; i++)
        bytes += nnt_tensor_bytes(l->params[i].value);
    for (int i = 0; i < l->nweight_reads; i++) {
        const nnt_tensor *w = l->weight_reads[i].weight;
        if (!is_own_param(l, w))
            bytes += nnt_tensor_bytes(w);
        if (bf16 && w->dtype != NNT_BF16)   /* its copy; none for a matrix kept in bf16 */
            bytes += nnt_tensor_bytes(w) / 2;
    }
    for (int i = 0; i < l->nchildren; i++)
        bytes += weight_bytes(l->children[i], bf16);
    return bytes;
}

/* The most bytes of weights l's forward or backward holds at once while releasing: a chain
 * with a window (nnt_layer_release_window: a sequential, a model) two adjacent children's,
 * any other layer all of its subtree's. */
static int64_t gathered_at_once(const nnt_layer *l, int bf16)
{
    int chain = l->vt->kind == NNT_LAYER_SEQUENTIAL || l->vt->kind == NNT_LAYER_MODEL;
    if (!chain || l->nchildren == 0)
        return weight_bytes(l, bf16);
    int64_t most = 0, prev = 0;
    for (int i = 0; i < l->nchildren; i++) {
        int64_t here = gathered_at_once(l->children[i], bf16);
        if (prev + here > most)
            most = prev + here;
        prev = here;
    }
    return most;
}

/* Before the forward of a tree's root: under release_weights the budget check counts each
 * rank's share of the weights and, once, what the tree gathers at once. A GPT layer's
 * forward is its tree's (a root too), which checks. */
static int check_release_window(nnt_layer *l, const char *fn)
{
    if (l->parent || l->vt->kind == NNT_LAYER_GPT || !releasing(l->ctx) ||
        l->ctx->distribution == NNT_DIST_ROOT)
        return NNT_OK;
    nnt_precision precision = NNT_PRECISION_FP32;
    NNT_TRY(nnt_ctx_precision(l->ctx, &precision));
    return nnt_ctx_set_release_window(l->ctx,
                                      gathered_at_once(l, precision == NNT_PRECISION_BF16), fn);
}

void nnt_layer_next_priority(nnt_ctx *ctx)
{
    if (ctx->task_order)
        ctx->task_prio = ctx->task_prio < -(1 << 30) ? 0 : ctx->task_prio - 2;
}

NNT_API int nnt_layer_forward(nnt_layer *layer, nnt_tensor *x, nnt_tensor **y)
{
    int rc = nnt_layer_check(layer, "nnt_layer_forward");
    if (rc)
        return rc;
    if (!x)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "nnt_layer_forward: x is NULL (a %s layer)",
                        layer->vt->kind_name);
    if ((rc = nnt_tensor_check_readable(x, "nnt_layer_forward")))
        return rc;
    if ((rc = check_release_window(layer, "nnt_layer_forward")))
        return rc;
    nnt_tensor *out = NULL;
    layer->forward_pending = 0;
    nnt_layer_next_priority(layer->ctx);
    rc = layer->vt->forward(layer, x, &out);
    if (rc)
        return rc;
    nnt_layer_release_weights(layer);
    layer->forward_pending = 1;
    if (y)
        *y = out;
    return NNT_OK;
}

NNT_API int nnt_layer_loss(nnt_layer *layer, double *loss)
{
    int rc = nnt_layer_check(layer, "nnt_layer_loss");
    if (rc)
        return rc;
    if (!loss)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "nnt_layer_loss: loss is NULL");
    if (layer->vt->loss)
        return layer->vt->loss(layer, loss);
    nnt_layer *last = last_child(layer);
    if (!last)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "nnt_layer_loss: a %s layer computes no loss",
                        layer->vt->kind_name);
    return nnt_layer_loss(last, loss);
}

/* Count in the budget the gradients of the tree not counted yet (created deferred, never
 * written), before something writes them (fn: the caller, for a refusal). Composite kinds
 * call nnt_layer_backward on their children: once every gradient counts (from the first
 * backward on), no walk. */
static int count_grads(nnt_layer *l, const char *fn)
{
    if (!nnt_ctx_has_deferred(l->ctx))
        return NNT_OK;
    for (int i = 0; i < l->nparams; i++)
        if (l->params[i].grad)   /* NULL: frozen */
            NNT_TRY(nnt_ctx_count_deferred(l->ctx, l->params[i].grad, fn));
    for (int c = 0; c < l->nchildren; c++)
        NNT_TRY(count_grads(l->children[c], fn));
    nnt_layer *inner = l->vt->inner ? l->vt->inner(l) : NULL;
    return inner && inner != l ? count_grads(inner, fn) : NNT_OK;
}

NNT_API int nnt_layer_backward(nnt_layer *layer, nnt_tensor *dy, nnt_tensor **dx)
{
    int rc = nnt_layer_check(layer, "nnt_layer_backward");
    if (rc)
        return rc;
    if (!layer->forward_pending)
        return nnt_fail(layer->ctx, NNT_E_STATE,
                        "nnt_layer_backward: no forward of this %s layer since its last "
                        "backward (each backward needs its own forward)",
                        layer->vt->kind_name);
    int targets = has_targets(layer);
    if (!dy && !targets)
        return nnt_fail(layer->ctx, NNT_E_INVAL,
                        "nnt_layer_backward: dy is NULL but this %s layer has no targets "
                        "(no loss to differentiate)", layer->vt->kind_name);
    if (dy && targets)
        return nnt_fail(layer->ctx, NNT_E_INVAL,
                        "nnt_layer_backward: dy given to a %s layer with targets (pass NULL: "
                        "the gradient of its mean loss is used)", layer->vt->kind_name);
    if (dy && (rc = nnt_tensor_check_readable(dy, "nnt_layer_backward")))
        return rc;
    /* the gradients this backward writes for the first time now count in the budget */
    if ((rc = count_grads(layer, "nnt_layer_backward")))
        return rc;
    nnt_tensor *grad_in = NULL;
    nnt_layer_next_priority(layer->ctx);
    rc = layer->vt->backward(layer, dy, &grad_in);
    if (rc)
        return rc;
    nnt_layer_release_weights(layer);
    layer->forward_pending = 0;
    if (layer->ctx->backward_hook &&
        (rc = layer->ctx->backward_hook(layer->ctx->backward_hook_user, layer)))
        return rc;
    if (dx)
        *dx = grad_in;
    return NNT_OK;
}

int nnt_layer_each_grad(nnt_layer *l, nnt_layer_grad_fn fn, void *user)
{
    if (l->vt->inner && l->vt->inner(l) != l)
        return NNT_OK;   /* its parameters are its tree's, whose layers write them */
    for (int i = 0; i < l->nparams; i++)
        if (l->params[i].grad && !l->params[i].frozen)
            NNT_TRY(fn(user, l, l->params[i].value, 1));
    for (int i = 0; i < l->nweight_reads; i++) {
        nnt_tensor *w = l->weight_reads[i].weight;
        int seen = is_own_param(l, w);
        for (int k = 0; k < i && !seen; k++)
            seen = l->weight_reads[k].weight == w;
        if (!seen)
            NNT_TRY(fn(user, l, w, 0));
    }
    return NNT_OK;
}

int nnt_layer_each_grad_tree(nnt_layer *l, nnt_layer_grad_fn fn, void *user)
{
    NNT_TRY(nnt_layer_each_grad(l, fn, user));
    for (int c = 0; c < l->nchildren; c++)
        NNT_TRY(nnt_layer_each_grad_tree(l->children[c], fn, user));
    nnt_layer *inner = l->vt->inner ? l->vt->inner(l) : NULL;
    return inner && inner != l ? nnt_layer_each_grad_tree(inner, fn, user) : NNT_OK;
}

/* ---- parameters ---------------------------------------------------------------------------- */

static void free_listing(nnt_layer *l)
{
    for (int64_t i = 0; i < l->nlisted; i++)
        free(l->listed_names[i]);
    free(l->listed_names);
    free(l->listed);
    l->listed_names = NULL;
    l->listed = NULL;
    l->nlisted = 0;
}

static int already_listed(const nnt_layer *root, const nnt_layer_param_rec *p)
{
    for (int64_t i = 0; i < root->nlisted; i++)
        if (root->listed[i]->value == p->value)
            return 1;
    return 0;
}

static int list_append(nnt_layer *root, const char *prefix, nnt_layer_param_rec *p)
{
    if (already_listed(root, p))
        return NNT_OK;
    size_t n = strlen(prefix) + strlen(p->name) + 1;
    char *full = malloc(n);
    char **names = realloc(root->listed_names, (size_t)(root->nlisted + 1) * sizeof *names);
    if (names)
        root->listed_names = names;
    nnt_layer_param_rec **recs = realloc(root->listed, (size_t)(root->nlisted + 1) * sizeof *recs);
    if (recs)
        root->listed = recs;
    if (!full || !names || !recs) {
        free(full);
        return NNT_E_NOMEM;
    }
    memcpy(full, prefix, strlen(prefix));
    memcpy(full + strlen(prefix), p->name, strlen(p->name) + 1);
    root->listed_names[root->nlisted] = full;
    root->listed[root->nlisted] = p;
    root->nlisted++;
    return NNT_OK;
}

/* Own parameters first, then the children's, depth first, in registration order. A child
 * named "" adds no prefix: its parameters are listed under its parent's. */
static int list_subtree(nnt_layer *root, nnt_layer *l, const char *prefix)
{
    for (int i = 0; i < l->nparams; i++) {
        int rc = list_append(root, prefix, &l->params[i]);
        if (rc)
            return rc;
    }
    for (int c = 0; c < l->nchildren; c++) {
        size_t len = strlen(l->child_names[c]);
        size_t n = strlen(prefix) + len + (len ? 2 : 1);   /* "prefix" "name" "." NUL */
        char *sub = malloc(n);
        if (!sub)
            return NNT_E_NOMEM;
        memcpy(sub, prefix, strlen(prefix));
        memcpy(sub + strlen(prefix), l->child_names[c], len);
        if (len)
            sub[n - 2] = '.';
        sub[n - 1] = '\0';
        int rc = list_subtree(root, l->children[c], sub);
        free(sub);
        if (rc)
            return rc;
    }
    return NNT_OK;
}

static int ensure_listing(nnt_layer *l, const char *fn)
{
    if (l->listed || (l->nparams == 0 && l->nchildren == 0))
        return NNT_OK;
    int rc = list_subtree(l, l, "");
    if (rc) {
        free_listing(l);
        return nnt_fail(l->ctx, rc, "%s: out of memory listing parameters", fn);
    }
    return NNT_OK;
}

NNT_API int nnt_layer_num_params(const nnt_layer *layer, int64_t *count, int64_t *numel)
{
    int rc = nnt_layer_check(layer, "nnt_layer_num_params");
    if (rc)
        return rc;
    nnt_layer *mut = (nnt_layer *)layer;   /* the listing is a cache, not part of its value */
    if ((rc = ensure_listing(mut, "nnt_layer_num_params")))
        return rc;
    int64_t total = 0;
    for (int64_t i = 0; i < mut->nlisted; i++) {
        int64_t n = 0;
        nnt_tensor_numel(mut->listed[i]->value, &n);
        total += n;
    }
    if (count)
        *count = mut->nlisted;
    if (numel)
        *numel = total;
    return NNT_OK;
}

NNT_API int nnt_layer_param(nnt_layer *layer, int64_t i, nnt_param_info *info)
{
    int rc = nnt_layer_check(layer, "nnt_layer_param");
    if (rc)
        return rc;
    if (!info)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "nnt_layer_param: info is NULL");
    /* 0.3 appended frozen: a caller of the 0.2 size gets the fields it knows */
    size_t old_size = offsetof(nnt_param_info, frozen);
    if (info->size < old_size)
        return nnt_fail(layer->ctx, NNT_E_INVAL,
                        "nnt_layer_param: info->size %zu < sizeof(nnt_param_info) %zu (set "
                        "it before the call)", info->size, sizeof(nnt_param_info));
    if ((rc = ensure_listing(layer, "nnt_layer_param")))
        return rc;
    if (i < 0 || i >= layer->nlisted)
        return nnt_fail(layer->ctx, NNT_E_INVAL,
                        "nnt_layer_param: index %lld outside [0, %lld)", (long long)i,
                        (long long)layer->nlisted);
    const nnt_layer_param_rec *p = layer->listed[i];
    info->name = layer->listed_names[i];
    info->value = p->value;
    info->grad = p->grad;
    info->decay = p->decay;
    if (info->size >= sizeof(nnt_param_info))
        info->frozen = p->frozen;
    return NNT_OK;
}

/* Zero-fill the gradients of the tree, or (drop) let kinds with a clear_grad drop theirs. */
static int reset_grads(nnt_layer *l, int drop)
{
    if (drop && l->vt->clear_grad) {
        NNT_TRY(l->vt->clear_grad(l));
    } else {
        for (int i = 0; i < l->nparams; i++) {
            if (l->params[i].grad)   /* NULL: frozen */
                NNT_TRY(nnt_tensor_fill(l->params[i].grad, 0.0));
            l->params[i].grad_dropped = 0;
        }
    }
    for (int c = 0; c < l->nchildren; c++)
        NNT_TRY(reset_grads(l->children[c], drop));
    return NNT_OK;
}

int nnt_layer_finish(nnt_layer *l, int rc, nnt_layer **out)
{
    /* the kinds that build into a local first have not seen out yet */
    if (rc == 0 && !out)
        rc = nnt_fail(l->ctx, NNT_E_INVAL, "%s: out is NULL", l->create_fn);
    if (rc == 0 && l->ctx->defer_init == 0)
        rc = nnt_layer_init(l, 0);
    if (rc) {
        nnt_layer_destroy(l);
        return rc;
    }
    *out = l;
    return NNT_OK;
}

int nnt_layer_drop_grads(nnt_layer *l)
{
    for (int i = 0; i < l->nparams; i++) {
        if (!l->params[i].grad)   /* frozen */
            continue;
        nnt_tensor_invalidate(l->params[i].grad);
        l->params[i].grad_dropped = 1;
    }
    return NNT_OK;
}

double nnt_layer_grad_beta(nnt_layer *l, const nnt_tensor *grad)
{
    for (int i = 0; i < l->nparams; i++) {
        if (l->params[i].grad == grad && l->params[i].grad_dropped) {
            l->params[i].grad_dropped = 0;
            return 0.0;
        }
    }
    return 1.0;
}

NNT_API int nnt_layer_zero_grad(nnt_layer *layer)
{
    int rc = nnt_layer_check(layer, "nnt_layer_zero_grad");
    if (!rc)
        rc = count_grads(layer, "nnt_layer_zero_grad");
    return rc ? rc : reset_grads(layer, 0);
}

NNT_API int nnt_layer_clear_grad(nnt_layer *layer)
{
    int rc = nnt_layer_check(layer, "nnt_layer_clear_grad");
    return rc ? rc : reset_grads(layer, 1);
}

/* ---- frozen parameters --------------------------------------------------------------------- */

nnt_layer_param_rec *nnt_layer_own_param(const nnt_layer *l, const nnt_tensor *value)
{
    for (int i = 0; i < l->nparams; i++)
        if (l->params[i].value == value)
            return &l->params[i];
    return NULL;
}

int nnt_layer_param_narrow(nnt_ctx *ctx, nnt_layer_param_rec *p)
{
    if (!p->frozen || !p->products_only || p->keep_fp32)
        return NNT_OK;
    if (p->nf4)
        return nnt_tensor_retype(p->value, NNT_NF4);
    if (p->value->dtype != NNT_FP32 || ctx->precision != NNT_PRECISION_BF16)
        return NNT_OK;
    return nnt_tensor_retype(p->value, NNT_BF16);
}

int nnt_layer_nf4_fits(const nnt_layer *l, const nnt_layer_param_rec *p, const char *name,
                       const char *fn)
{
    const nnt_tensor *v = p->value;
    int64_t run = 0;
    /* (not keep_fp32: NNT_FREEZE_NF4 clears it, a matrix frozen keeping fp32 before is
     * quantized too) */
    if (!p->products_only || p->output_head || v->dtype == NNT_NF4 ||
        nnt_nf4_view(v->ndim, v->shape, v->tile, &run) >= 0)
        return NNT_OK;
    return nnt_fail(l->ctx, NNT_E_SHAPE, "%s: %s cannot be kept in NF4: its tiles hold runs of "
                    "%lld consecutive values, not whole blocks of 64 (NF4's); choose a tiling "
                    "whose tiles of its inputs are multiples of 64, or freeze it with "
                    "NNT_FREEZE", fn, name, (long long)run);
}

nnt_tensor *nnt_layer_grad_of(const nnt_layer *l, const nnt_tensor *value)
{
    for (int i = 0; i < l->nparams; i++)
        if (l->params[i].value == value)
            return l->params[i].frozen ? NULL : l->params[i].grad;
    return NULL;
}

void nnt_layer_remove_param(nnt_layer *l, const nnt_tensor *value)
{
    for (int i = 0; i < l->nparams; i++) {
        nnt_layer_param_rec *p = &l->params[i];
        if (p->value != value)
            continue;
        if (p->owned) {
            nnt_tensor_destroy(p->value);
            nnt_tensor_destroy(p->grad);
        }
        free(p->name);
        memmove(p, p + 1, (size_t)(l->nparams - i - 1) * sizeof *p);
        l->nparams--;
        return;
    }
}

int nnt_layer_params_changed(nnt_layer *l)
{
    for (nnt_layer *a = l; a; a = a->parent)
        free_listing(a);
    return NNT_OK;
}

void nnt_layer_forget_activation(nnt_layer *l, nnt_tensor **t)
{
    for (int i = 0; i < l->nacts; i++)
        if (l->acts[i] == t) {
            l->acts[i] = l->acts[--l->nacts];
            return;
        }
}

int nnt_layer_set_frozen(nnt_layer *root, nnt_layer_param_rec *p, int mode)
{
    if (mode != NNT_UNFREEZE) {
        /* a matrix kept in bf16 or NF4 already stays so: its fp32 values are gone */
        p->keep_fp32 = mode == NNT_FREEZE_KEEP_FP32;
        p->nf4 = (mode == NNT_FREEZE_NF4 && !p->output_head) || p->value->dtype == NNT_NF4;
        if (!p->frozen) {
            if (p->owned)
                nnt_tensor_destroy(p->grad);
            p->grad = NULL;
            p->grad_dropped = 0;
            p->frozen = 1;
        }
        /* under bf16 products a matrix only products read is kept in bf16 from now on (no
         * fp32 memory at all when its values are not written yet) */
        return nnt_layer_param_narrow(root->ctx, p);
    }
    if (!p->frozen)
        return NNT_OK;
    /* the values a matrix kept in bf16 or NF4 has, in fp32 again (the optimizer updates
     * fp32) */
    NNT_TRY(nnt_tensor_retype(p->value, NNT_FP32));
    p->keep_fp32 = 0;
    p->nf4 = 0;
    nnt_tensor *v = p->value, *g = NULL;
    int rc = nnt_tensor_create_beside(root->ctx, NNT_FP32, v->ndim, v->shape, v->tile, v,
                                      root->ctx->distribution != NNT_DIST_DATA
                                          ? NNT_HELD_STAYS : NNT_HELD_ANYWHERE, &g);
    if (rc == 0) {
        nnt_tensor_set_kind(g, NNT_MEM_GRADIENTS);
        rc = nnt_tensor_fill(g, 0.0);
    }
    if (rc) {
        nnt_tensor_destroy(g);
        return rc;
    }
    p->grad = g;
    p->frozen = 0;
    return NNT_OK;
}

static void free_names(char **names, int64_t n)
{
    for (int64_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

/* The tree of layer, whose records say what freezing and adapters did (a GPT layer's own
 * records of the same tensors do not). */
static nnt_layer *records_tree(nnt_layer *layer)
{
    nnt_layer *tree = layer->vt->inner ? layer->vt->inner(layer) : layer;
    return tree ? tree : layer;
}

/* *files: the file names of tree's listed parameters (layer's file_names: a layer that
 * registers another tree's parameters registers them in the tree's order), or NULL where
 * layer has none. */
static int file_names_of(nnt_layer *layer, nnt_layer *tree, const char *fn, char ***files)
{
    *files = NULL;
    if (!layer->file_names)
        return NNT_OK;
    char **names = calloc((size_t)(tree->nlisted ? tree->nlisted : 1), sizeof *names);
    if (!names)
        return nnt_fail(layer->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    int rc = layer->file_names(layer, tree->nlisted, names);
    if (rc) {
        free_names(names, tree->nlisted);
        return rc;
    }
    *files = names;
    return NNT_OK;
}

int nnt_layer_freeze_mode(int freeze)
{
    return freeze == NNT_UNFREEZE || freeze == NNT_FREEZE_KEEP_FP32 || freeze == NNT_FREEZE_NF4
               ? freeze
               : NNT_FREEZE;
}

NNT_API int nnt_layer_freeze(nnt_layer *layer, const char *pattern, int freeze, int64_t *count)
{
    const char *fn = "nnt_layer_freeze";
    NNT_TRY(nnt_layer_check(layer, fn));
    if (!pattern)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: pattern is NULL", fn);
    int mode = nnt_layer_freeze_mode(freeze);
    nnt_layer *tree = records_tree(layer);
    NNT_TRY(ensure_listing(tree, fn));
    char **files = NULL;
    NNT_TRY(file_names_of(layer, tree, fn, &files));
    int64_t n = 0;
    int rc = NNT_OK;
    /* NF4: every matrix matched fits its blocks, or nothing changes */
    for (int pass = mode == NNT_FREEZE_NF4 ? 0 : 1; pass < 2; pass++)
        for (int64_t i = 0; rc == 0 && i < tree->nlisted; i++) {
            if (fnmatch(pattern, tree->listed_names[i], 0) != 0 &&
                !(files && files[i] && fnmatch(pattern, files[i], 0) == 0))
                continue;
            if (pass == 0) {
                rc = nnt_layer_nf4_fits(layer, tree->listed[i], tree->listed_names[i], fn);
                continue;
            }
            rc = nnt_layer_set_frozen(tree, tree->listed[i], mode);
            n++;
        }
    if (rc == 0 && layer->vt->reregister)
        rc = layer->vt->reregister(layer);
    if (rc == 0 && n == 0) {
        char files_too[300] = "";
        for (int64_t i = 0; files && i < tree->nlisted && !files_too[0]; i++)
            if (files[i] && strcmp(files[i], tree->listed_names[i]) != 0)
                snprintf(files_too, sizeof files_too, ", or as the model's files name them, "
                         "such as '%s'", files[i]);
        rc = nnt_fail(layer->ctx, NNT_E_INVAL, "%s: '%s' matches no parameter of the %s layer "
                      "(names such as '%s'%s; * matches any text, dots included)", fn, pattern,
                      layer->vt->kind_name, tree->nlisted ? tree->listed_names[0] : "none",
                      files_too);
    }
    free_names(files, tree->nlisted);
    if (rc)
        return rc;
    if (count)
        *count = n;
    return NNT_OK;
}

/* ---- initialisation ------------------------------------------------------------------------- */

static int64_t count_blocks(const nnt_layer *l)
{
    int64_t n = l->vt->num_blocks ? l->vt->num_blocks(l) : (l->vt->kind == NNT_LAYER_BLOCK);
    for (int c = 0; c < l->nchildren; c++)
        n += count_blocks(l->children[c]);
    return n;
}

/* splitmix64's finaliser of z */
static uint64_t mix_final(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The seed of one parameter: the layer seed mixed with a hash of its full name, so each
 * tensor gets its own stream whatever the enumeration order or the tiling. */
static uint64_t param_seed(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a 64 */
    for (const unsigned char *s = (const unsigned char *)name; *s; s++)
        h = (h ^ *s) * 0x100000001b3ull;
    return mix_final(seed + h + 0x9e3779b97f4a7c15ull);
}

uint64_t gl_pass_seed(uint64_t seed, int64_t pass)
{
    return mix_final(seed + 0x9e3779b97f4a7c15ull * (uint64_t)pass);
}

static int init_param(const nnt_layer_param_rec *p, const char *name, uint64_t seed,
                      int64_t nblocks)
{
    switch (p->init) {
    case NNT_INIT_ZERO:
        return nnt_tensor_fill(p->value, 0.0);
    case NNT_INIT_ONE:
        return nnt_tensor_fill(p->value, 1.0);
    case NNT_INIT_KAIMING_A: {   /* torch's kaiming_uniform_(a = sqrt(5)): 1 / sqrt(fan_in) */
        const nnt_tensor *a = p->value;
        double bound = 1.0 / sqrt((double)(nnt_box_numel(a->ndim, a->shape) / a->shape[0]));
        return nnt_tensor_fill_uniform(p->value, param_seed(seed, name), -bound, bound);
    }
    case NNT_INIT_NORMAL_PROJ:
        return nnt_tensor_fill_normal(p->value, param_seed(seed, name), 0.0,
                                      nblocks > 0 ? GPT2_INIT_STD / sqrt(2.0 * (double)nblocks)
                                                  : GPT2_INIT_STD);
    case NNT_INIT_NORMAL:
    default:
        return nnt_tensor_fill_normal(p->value, param_seed(seed, name), 0.0, GPT2_INIT_STD);
    }
}

/* The parameters of the tree (base: not the adapters; unwritten: only those never
 * written), each from seed by its rule. A frozen matrix kept in bf16 is initialised in fp32,
 * then rounded to bf16 again (under bf16 products; else at the next bf16 product), one
 * tensor at a time: a frozen base never exists in fp32 as a whole. */
static int init_listed(nnt_layer *layer, const char *fn, uint64_t seed, int base, int unwritten)
{
    int rc = nnt_layer_check(layer, fn);
    if (rc || (rc = ensure_listing(layer, fn)))
        return rc;
    int64_t nblocks = count_blocks(layer);
    for (int64_t i = 0; i < layer->nlisted; i++) {
        nnt_layer_param_rec *p = layer->listed[i];
        if ((base && p->adapter) || (unwritten && p->value->written))
            continue;
        if ((rc = nnt_tensor_count_first_write(p->value, fn)) ||   /* built unwritten */
            (rc = nnt_tensor_retype(p->value, NNT_FP32)) ||
            (rc = init_param(p, layer->listed_names[i], seed, nblocks)) ||
            (rc = nnt_layer_param_narrow(layer->ctx, p)))
            return rc;
        /* narrowed: its fp32 tiles go before the next tensor's are written (else the fills
         * of every tensor, ready at once, can run before the conversions) */
        if ((p->value->dtype == NNT_BF16 || p->value->dtype == NNT_NF4) &&
            (rc = nnt_tensor_wait_written(p->value)))
            return rc;
    }
    /* the fp32 tiles of the frozen matrices narrowed above will not come again: their
     * blocks are not kept for the steps */
    nnt_ram_settle();
    return NNT_OK;
}

int nnt_layer_count_values(nnt_layer *layer, const char *fn)
{
    nnt_layer *tree = records_tree(layer);
    NNT_TRY(ensure_listing(tree, fn));
    for (int64_t i = 0; i < tree->nlisted; i++)
        NNT_TRY(nnt_tensor_count_first_write(tree->listed[i]->value, fn));
    return NNT_OK;
}

NNT_API int nnt_layer_init(nnt_layer *layer, uint64_t seed)
{
    return init_listed(layer, "nnt_layer_init", seed, 0, 0);
}

int nnt_layer_init_base(nnt_layer *layer, uint64_t seed, int unwritten)
{
    return init_listed(records_tree(layer), "nnt_layer_init", seed, 1, unwritten);
}

/* ---- destruction ---------------------------------------------------------------------------- */

NNT_API void nnt_layer_destroy(nnt_layer *layer)
{
    if (!layer || layer->magic != NNT_LAYER_MAGIC)
        return;
    if (layer->parent && layer->parent->magic == NNT_LAYER_MAGIC) {
        nnt_log(NNT_LOG_WARN, "nnt_layer_destroy: ignored on a %s layer owned by a %s layer "
                "(destroy the outermost layer)", layer->vt->kind_name,
                layer->parent->vt->kind_name);
        return;
    }
    layer->parent = NULL;
    if (layer->vt->destroy)
        layer->vt->destroy(layer);
    for (int i = 0; i < layer->nparams; i++) {
        if (layer->params[i].owned) {
            nnt_tensor_destroy(layer->params[i].value);
            nnt_tensor_destroy(layer->params[i].grad);
        }
        free(layer->params[i].name);
    }
    free(layer->params);
    for (int c = 0; c < layer->nchildren; c++) {
        layer->children[c]->parent = NULL;
        nnt_layer_destroy(layer->children[c]);
        free(layer->child_names[c]);
    }
    free(layer->children);
    free(layer->child_names);
    free_listing(layer);
    free(layer->acts);
    free(layer->impl);
    layer->magic = 0;
    free(layer);
}

nnt_layer_param_rec *nnt_layer_listed(nnt_layer *l, int64_t i)
{
    return i >= 0 && i < l->nlisted ? l->listed[i] : NULL;
}

int nnt_layer_init_adapters(nnt_layer *l, uint64_t seed)
{
    NNT_TRY(ensure_listing(l, "nnt_model_lora_add"));
    for (int64_t i = 0; i < l->nlisted; i++)
        if (l->listed[i]->adapter)
            NNT_TRY(init_param(l->listed[i], l->listed_names[i], seed, 0));
    return NNT_OK;
}
