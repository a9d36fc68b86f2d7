/* The generic composite layers: mlp (c_fc, c_proj), block (ln_1, attn, ln_2, mlp, with the
 * two residual connections) and sequential (any chain). Children run through the public
 * nnt_layer_forward / nnt_layer_backward, which keep each child's forward/backward order. */
#include "generic.h"

#include <stdio.h>

/* ---- chains (mlp, sequential) ------------------------------------------------------------ */

static int chain_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    for (int i = 0; i < l->nchildren; i++)
        NNT_TRY(nnt_layer_forward(l->children[i], x, &x));
    *y = x;
    return NNT_OK;
}

/* dy NULL when the last child has targets. (A child without input gradient, an embedding,
 * can only come first: it alone takes int32 tokens.) */
static int chain_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    for (int i = l->nchildren - 1; i >= 0; i--)
        NNT_TRY(nnt_layer_backward(l->children[i], dy, &dy));
    *dx = dy;
    return NNT_OK;
}

/* Adopt child under name; on failure the child is destroyed. */
static int adopt(nnt_layer *l, const char *name, nnt_layer *child)
{
    int rc = nnt_layer_add_child(l, name, child);
    if (rc)
        nnt_layer_destroy(child);
    return rc;
}

/* ---- mlp ---------------------------------------------------------------------------------- */

static const nnt_layer_vt mlp_vt = {
    NNT_LAYER_MLP, "mlp", chain_forward, chain_backward, NULL, NULL, NULL, NULL, NULL, NULL};

/* c_fc (C -> hidden, GELU) and c_proj (hidden -> C, the output projection). */
static int mlp_children(nnt_layer *l, int64_t C, int64_t hidden, const nnt_tiling *t,
                        const char *fn)
{
    int64_t ct = gl_tile(t->channels, C), ht = gl_tile(t->hidden, hidden);
    nnt_layer *fc = NULL, *proj = NULL;
    NNT_TRY(gl_linear_new(l->ctx, C, hidden, NNT_LINEAR_BIAS | NNT_LINEAR_GELU, ct, ht, fn, &fc));
    NNT_TRY(adopt(l, "c_fc", fc));
    NNT_TRY(gl_linear_new(l->ctx, hidden, C, NNT_LINEAR_BIAS, ht, ct, fn, &proj));
    proj->params[0].init = NNT_INIT_NORMAL_PROJ;   /* "weight" */
    return adopt(l, "c_proj", proj);
}

int gl_mlp_new(nnt_ctx *ctx, int64_t channels, int64_t hidden, const nnt_tiling *tiling,
               const char *fn, nnt_layer **out)
{
    nnt_tiling t;
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &mlp_vt, 0, fn, &l));
    int rc = gl_tiling(ctx, tiling, fn, &t);
    if (rc == 0)
        rc = mlp_children(l, channels, hidden, &t, fn);
    if (rc) {
        nnt_layer_destroy(l);
        return rc;
    }
    *out = l;
    return NNT_OK;
}

NNT_API int nnt_layer_mlp_create(nnt_ctx *ctx, int64_t channels, int64_t hidden,
                                 const nnt_tiling *tiling, nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(gl_mlp_new(ctx, channels, hidden, tiling, "nnt_layer_mlp_create", &l));
    return nnt_layer_finish(l, 0, out);
}

/* ---- block -------------------------------------------------------------------------------- */

enum { LN_1, ATTN, LN_2, MLP };

typedef struct block {
    nnt_tensor *x;                  // the input of the last forward (not owned)
    nnt_tensor *r2;                 // (B, T, C) x + attn(ln_1(x))
    nnt_tensor *y;                  // (B, T, C) r2 + mlp(ln_2(r2))
    nnt_tensor *dr2, *dx;           // r2's and x's layouts
    nnt_tensor *dy_cache;
} block;

/* *sum = a + b in a's layout (b in any tiling). */
static int add_to_new(nnt_layer *l, nnt_tensor *a, nnt_tensor *b, nnt_tensor **sum)
{
    NNT_TRY(nnt_layer_ensure(l, sum, NNT_FP32, a->ndim, a->shape, a->tile));
    NNT_TRY(nnt_tensor_copy(b, *sum));
    return nnt_tensor_axpby(1.0, a, 1.0, *sum);
}

static int block_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    block *k = l->impl;
    nnt_tensor *h = NULL;
    NNT_TRY(nnt_layer_forward(l->children[LN_1], x, &h));
    NNT_TRY(nnt_layer_forward(l->children[ATTN], h, &h));
    NNT_TRY(add_to_new(l, h, x, &k->r2));
    NNT_TRY(nnt_layer_forward(l->children[LN_2], k->r2, &h));
    NNT_TRY(nnt_layer_forward(l->children[MLP], h, &h));
    NNT_TRY(add_to_new(l, h, k->r2, &k->y));
    k->x = x;
    *y = k->y;
    return NNT_OK;
}

static int block_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    block *k = l->impl;
    nnt_tensor *g = NULL, *d = NULL;
    NNT_TRY(gl_dy_like(l, dy, k->y, "nnt_layer_backward", &k->dy_cache, &g));
    NNT_TRY(nnt_layer_backward(l->children[MLP], g, &d));
    NNT_TRY(nnt_layer_backward(l->children[LN_2], d, &d));
    NNT_TRY(add_to_new(l, d, g, &k->dr2));   /* through the residual and through ln_2 */
    NNT_TRY(nnt_layer_backward(l->children[ATTN], k->dr2, &d));
    NNT_TRY(nnt_layer_backward(l->children[LN_1], d, &d));
    NNT_TRY(add_to_new(l, d, k->dr2, &k->dx));
    *dx = k->dx;
    return NNT_OK;
}

static void block_destroy(nnt_layer *l)
{
    block *k = l->impl;
    nnt_tensor *own[] = {k->r2, k->y, k->dr2, k->dx, k->dy_cache};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        nnt_tensor_destroy(own[i]);
}

static const nnt_layer_vt block_vt = {
    NNT_LAYER_BLOCK, "block", block_forward, block_backward, NULL, NULL, NULL, NULL,
    block_destroy, NULL};

static int block_children(nnt_layer *l, int64_t C, int64_t NH, int64_t hidden,
                          const nnt_tiling *t, const char *fn)
{
    static const char *const names[4] = {"ln_1", "attn", "ln_2", "mlp"};
    for (int i = 0; i < 4; i++) {
        nnt_layer *child = NULL;
        if (i == ATTN)
            NNT_TRY(gl_attention_new(l->ctx, C, NH, t, fn, &child));
        else if (i == MLP)
            NNT_TRY(gl_mlp_new(l->ctx, C, hidden, t, fn, &child));
        else
            NNT_TRY(gl_layernorm_new(l->ctx, C, 1e-5, t, fn, &child));
        NNT_TRY(adopt(l, names[i], child));
    }
    return NNT_OK;
}

NNT_API int nnt_layer_block_create(nnt_ctx *ctx, int64_t channels, int64_t heads,
                                   int64_t hidden, const nnt_tiling *tiling, nnt_layer **out)
{
    const char *fn = "nnt_layer_block_create";
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &block_vt, sizeof(block), fn, &l));
    int rc = block_children(l, channels, heads, hidden, tiling, fn);
    if (rc) {
        nnt_layer_destroy(l);
        return rc;
    }
    return nnt_layer_finish(l, 0, out);
}

/* ---- sequential --------------------------------------------------------------------------- */

static const nnt_layer_vt sequential_vt = {
    NNT_LAYER_SEQUENTIAL, "sequential", chain_forward, chain_backward, NULL, NULL, NULL, NULL,
    NULL, NULL};

/* 0 if children[i] may join a new sequential of ctx, else a recorded failure. */
static int check_child(nnt_ctx *ctx, nnt_layer *const *children, int i, const char *fn)
{
    nnt_layer *c = children[i];
    if (!c)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: child %d is NULL", fn, i);
    for (int j = 0; j < i; j++)
        if (children[j] == c)
            return nnt_fail(ctx, NNT_E_INVAL, "%s: children %d and %d are the same layer", fn,
                            j, i);
    NNT_TRY(nnt_layer_check(c, fn));
    if (c->ctx != ctx)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: child %d belongs to another context", fn, i);
    if (c->parent)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: child %d (a %s layer) already belongs to a %s "
                        "layer", fn, i, c->vt->kind_name, c->parent->vt->kind_name);
    return NNT_OK;
}

static int check_children(nnt_ctx *ctx, int n, nnt_layer *const *children, nnt_layer **out,
                          const char *fn)
{
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    NNT_TRY(nnt_ctx_check(ctx, fn));
    if (n < 1 || !children)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: needs n >= 1 children (n = %d%s)", fn, n,
                        children ? "" : ", children NULL");
    for (int i = 0; i < n; i++)
        NNT_TRY(check_child(ctx, children, i, fn));
    return NNT_OK;
}

/* Destroy the children of a failed creation (each once; not those another layer owns). */
static void drop_children(int n, nnt_layer *const *children)
{
    for (int i = 0; children && i < n; i++) {
        int seen = !children[i];
        for (int j = 0; j < i && !seen; j++)
            seen = children[j] == children[i];
        if (!seen && children[i]->magic == NNT_LAYER_MAGIC && !children[i]->parent)
            nnt_layer_destroy(children[i]);
    }
}

NNT_API int nnt_layer_sequential_create(nnt_ctx *ctx, int n, nnt_layer *const *children,
                                        nnt_layer **out)
{
    const char *fn = "nnt_layer_sequential_create";
    if (out)
        *out = NULL;
    nnt_layer *l = NULL;
    int rc = check_children(ctx, n, children, out, fn);
    if (rc == 0)
        rc = nnt_layer_new(ctx, &sequential_vt, 0, fn, &l);
    if (rc) {
        drop_children(n, children);
        return rc;
    }
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        if ((rc = nnt_layer_add_child(l, name, children[i]))) {
            nnt_layer_destroy(l);   /* with the children adopted so far */
            drop_children(n - i, children + i);
            return rc;
        }
    }
    *out = l;
    return NNT_OK;
}
