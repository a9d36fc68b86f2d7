// SPDX-License-Identifier: MIT
/* LoRA adapters of the linear maps inside the generic layers (the linear layer, the attention
 * layer's projections): the math of an adapter, once. A frozen base map y = x W^T gets
 *
 *     y += s (x A^T) B^T          A (r, in...), B (out..., r), s = alpha / r (rsLoRA:
 *                                  alpha / sqrt(r))
 *
 * as two products, tasks like every other: u (rows..., r) = x A^T, then y (+)= s u B^T into
 * the base product's output. One A may feed several outputs (parts), each with its own B:
 * GPT-2's c_attn is one PEFT module whose B (3C, r) nnt keeps as the q, k and v parts that
 * its attention computes apart; their u is computed once. The backward:
 *
 *     dB_i = s g_i^T u,   du = s sum_i g_i B_i,   dA = du^T x,   dx += du A
 *
 * r lives in one tile, so every product takes the tilings of the base map's input and
 * outputs as they are.
 *
 * DoRA (PEFT's use_dora) rescales each output feature o of part i: with the adapter's input
 * x' (x, or its dropout) and t = x' W^T + s u B^T,
 *
 *     y = x W^T + b + (g - 1) t,   g = m / ||W_o + s (B A)_o||    (m: the magnitudes)
 *
 * (without dropout y = g (x W^T + s u B^T) + b). The norm is a constant of the backward
 * (PEFT detaches it), computed without forming W + s B A: ||W_o||^2 + B_o . q_o with
 * q = 2 s W A^T + s^2 B A A^T. With G the gradient of y:
 *
 *     dm = sum over rows of G t / norm,   the adapter's products take g G,
 *     dx = G W + (g - 1) G W through the dropout + the adapter's
 *
 * (without dropout the base map's products take g G: dx = g G W). */
#include "generic.h"

#include <stdio.h>
#include <stdlib.h>

static int64_t rows_of(const gl_lora *lo, const nnt_tensor *x)
{
    return x->ndim - lo->in_dims;
}

/* Mark the parameter whose value is t an adapter's. */
static void mark_adapter(nnt_layer *l, const nnt_tensor *t)
{
    for (int i = 0; i < l->nparams; i++)
        if (l->params[i].value == t)
            l->params[i].adapter = 1;
}

int gl_lora_new(nnt_layer *l, const gl_lora_spec *sp, gl_lora **out)
{
    gl_lora *lo = calloc(1, sizeof *lo);
    if (!lo)
        return nnt_fail(l->ctx, NNT_E_NOMEM, "nnt: out of memory adding a LoRA adapter");
    lo->nparts = sp->nparts;
    lo->in_dims = sp->in_dims;
    lo->scale = sp->scale;
    snprintf(lo->prefix, sizeof lo->prefix, "%s", sp->prefix);
    for (int i = 0; i < sp->nparts; i++) {
        lo->part_names[i] = sp->part_names[i];
        lo->base[i] = sp->base[i];
        lo->bias[i] = sp->bias[i];
        lo->owner[i] = sp->owner[i] ? sp->owner[i] : l;
    }
    int64_t ashape[NNT_MAX_DIMS], atile[NNT_MAX_DIMS];
    ashape[0] = atile[0] = sp->rank;
    for (int d = 0; d < sp->in_dims; d++) {
        ashape[1 + d] = sp->in[d];
        atile[1 + d] = sp->in_tile[d];
    }
    char name[256];
    snprintf(name, sizeof name, "%slora_A.weight", sp->prefix);
    int rc = nnt_layer_new_param(l, name, 1 + sp->in_dims, ashape, atile, 1, NNT_INIT_KAIMING_A,
                                 &lo->a, NULL);
    for (int i = 0; rc == 0 && i < sp->nparts; i++) {
        int64_t bshape[NNT_MAX_DIMS], btile[NNT_MAX_DIMS];
        int nd = sp->out_dims[i];
        for (int d = 0; d < nd; d++) {
            bshape[d] = sp->out[i][d];
            btile[d] = sp->out_tile[i][d];
        }
        bshape[nd] = btile[nd] = sp->rank;
        if (sp->nparts == 1)
            snprintf(name, sizeof name, "%slora_B.weight", sp->prefix);
        else
            snprintf(name, sizeof name, "%slora_B.%s.weight", sp->prefix, sp->part_names[i]);
        rc = nnt_layer_new_param(l, name, nd + 1, bshape, btile, 1, NNT_INIT_ZERO, &lo->b[i],
                                 NULL);
    }
    mark_adapter(l, lo->a);
    for (int i = 0; i < sp->nparts; i++)
        mark_adapter(l, lo->b[i]);
    if (rc) {
        gl_lora_free(l, lo);
        return rc;
    }
    *out = lo;
    return NNT_OK;
}

void gl_lora_free(nnt_layer *l, gl_lora *lo)
{
    if (!lo)
        return;
    nnt_tensor **acts[] = {&lo->u, &lo->du, &lo->xd, &lo->dxd, &lo->aat};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        nnt_layer_forget_activation(l, acts[i]);
        nnt_tensor_destroy(*acts[i]);
    }
    for (int i = 0; i < lo->nparts; i++) {
        nnt_tensor **part_acts[] = {&lo->n2[i], &lo->gain[i], &lo->rinv[i], &lo->q[i],
                                    &lo->pt[i], &lo->t[i], &lo->nbias[i]};
        for (size_t k = 0; k < sizeof part_acts / sizeof part_acts[0]; k++) {
            nnt_layer_forget_activation(l, part_acts[k]);
            nnt_tensor_destroy(*part_acts[k]);
        }
        nnt_temp_release(lo->gs[i]);
        nnt_temp_release(lo->h[i]);
        nnt_tensor_destroy(lo->w2[i]);
    }
    nnt_layer_remove_param(l, lo->a);
    for (int i = 0; i < lo->nparts; i++) {
        nnt_layer_remove_param(l, lo->b[i]);
        if (lo->m[i])
            nnt_layer_remove_param(l, lo->m[i]);
    }
    free(lo);
}

/* The seed of the dropout mask of the current pass: the adapter's, and the pass: the
 * trainer's micro-batch number, else the backwards done (either way a recompute's forward
 * gets its forward's mask). */
static uint64_t mask_seed(const nnt_layer *l, const gl_lora *lo)
{
    return gl_pass_seed(lo->seed, l->ctx->dropout_pass > 0 ? l->ctx->dropout_pass
                                                            : lo->passes + 1);
}

int gl_lora_begin(nnt_layer *l, gl_lora *lo, nnt_tensor *x)
{
    int rows = (int)rows_of(lo, x);
    lo->dropped = lo->dropout > 0.0 && !l->ctx->no_dropout;
    if (lo->dropped) {   /* x -> dropout(x), PEFT's lora_dropout on the adapter's input */
        NNT_TRY(nnt_layer_ensure(l, &lo->xd, NNT_FP32, x->ndim, x->shape, x->tile));
        NNT_TRY(nnt_tensor_dropout(x, mask_seed(l, lo), lo->dropout, lo->xd));
        x = lo->xd;
    }
    int64_t shape[NNT_MAX_DIMS], tile[NNT_MAX_DIMS];
    for (int d = 0; d < rows; d++) {
        shape[d] = x->shape[d];
        tile[d] = x->tile[d];
    }
    shape[rows] = tile[rows] = lo->a->shape[0];
    lo->x = x;   /* the input the products read: dropped, or x */
    /* u (rows..., r) = x (rows..., in...) A^T (r, in...) */
    NNT_TRY(nnt_layer_ensure(l, &lo->u, NNT_FP32, rows + 1, shape, tile));
    return nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 1.0, x, lo->a, 0.0, lo->u, lo->in_dims, 0);
}

/* ---- DoRA ------------------------------------------------------------------------------- */

int gl_lora_dora_add(nnt_layer *l, gl_lora *lo)
{
    for (int i = 0; i < lo->nparts; i++) {
        const nnt_tensor *b = lo->b[i];   // (out_i..., r): the magnitudes (out_i...)
        char name[256];
        if (lo->nparts == 1)
            snprintf(name, sizeof name, "%slora_magnitude_vector", lo->prefix);
        else
            snprintf(name, sizeof name, "%slora_magnitude_vector.%s", lo->prefix,
                     lo->part_names[i]);
        NNT_TRY(nnt_layer_new_param(l, name, b->ndim - 1, b->shape, b->tile, 1, NNT_INIT_ONE,
                                    &lo->m[i], NULL));
        mark_adapter(l, lo->m[i]);
    }
    lo->dora = 1;
    return NNT_OK;
}

/* w2_i = ||W_i||^2 per output feature, a pass over W_i only when it was written since (a
 * frozen base: once, not at every forward) */
static int dora_weight_norm2(nnt_layer *l, gl_lora *lo, int i)
{
    nnt_tensor *w = lo->base[i];
    const nnt_tensor *b = lo->b[i];
    uint64_t seen = 1 + nnt_tensor_writes(w);
    if (lo->w2[i] && lo->w2_of[i] == (const void *)w->tiles && lo->w2_seen[i] == seen)
        return NNT_OK;
    if (!lo->w2[i])
        NNT_TRY(nnt_tensor_create(l->ctx, NNT_FP32, b->ndim - 1, b->shape, b->tile, &lo->w2[i]));
    NNT_TRY(nnt_tensor_dot_trailing(w, w, 0.0, lo->w2[i]));
    lo->w2_of[i] = w->tiles, lo->w2_seen[i] = seen;
    return NNT_OK;
}

/* n2_i (out_i...) = ||W_i + s B_i A||^2 per output feature = ||W_i||^2 + B_i . q_i with
 * q_i = 2 s W_i A^T + s^2 B_i (A A^T); A A^T once for the parts (with part 0). W_i A^T is
 * computed as (A W_i^T)^T, W_i the second operand as in the forward's product (an NF4 W is
 * read so), then permuted. W_i fp32, bf16 or NF4 (QLoRA's base: the norms of its float
 * dequantization, as PEFT's). */
static int dora_norm2(nnt_layer *l, gl_lora *lo, int i)
{
    nnt_tensor *w = lo->base[i], *b = lo->b[i];
    int64_t r = lo->a->shape[0], rr[2] = {r, r};
    if (i == 0) {   /* A A^T (r, r) */
        NNT_TRY(nnt_layer_ensure(l, &lo->aat, NNT_FP32, 2, rr, rr));
        NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 1.0, lo->a, lo->a, 0.0, lo->aat,
                                lo->in_dims, 0));
    }
    int nd = b->ndim, perm[NNT_MAX_DIMS];
    int64_t ptshape[NNT_MAX_DIMS], pttile[NNT_MAX_DIMS];
    ptshape[0] = pttile[0] = r;
    for (int d = 0; d < nd - 1; d++) {
        ptshape[d + 1] = b->shape[d], pttile[d + 1] = b->tile[d];
        perm[d] = d + 1;
    }
    perm[nd - 1] = 0;
    NNT_TRY(nnt_layer_ensure(l, &lo->n2[i], NNT_FP32, nd - 1, b->shape, b->tile));
    NNT_TRY(nnt_layer_ensure(l, &lo->pt[i], NNT_FP32, nd, ptshape, pttile));
    NNT_TRY(nnt_layer_ensure(l, &lo->q[i], NNT_FP32, nd, b->shape, b->tile));
    NNT_TRY(dora_weight_norm2(l, lo, i));
    NNT_TRY(nnt_tensor_copy(lo->w2[i], lo->n2[i]));
    double s = lo->scale;
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 2.0 * s, lo->a, w, 0.0, lo->pt[i],
                            lo->in_dims, 0));
    NNT_TRY(nnt_tensor_permute(lo->pt[i], perm, lo->q[i]));
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, s * s, b, lo->aat, 1.0, lo->q[i], 1, 0));
    return nnt_tensor_dot_trailing(b, lo->q[i], 1.0, lo->n2[i]);
}

/* gain_i = m_i / norm and rinv_i = 1 / norm from the current A, B_i and W_i; m_i first set to
 * the norm when it holds no data (its base was not there at gl_lora_dora_init). */
static int dora_gains(nnt_layer *l, gl_lora *lo, int i)
{
    NNT_TRY(dora_norm2(l, lo, i));
    if (!lo->m[i]->written)   /* m = n2 / sqrt(n2) */
        NNT_TRY(nnt_tensor_rsqrt_mul(lo->n2[i], lo->n2[i], lo->m[i]));
    const nnt_tensor *m = lo->m[i];
    NNT_TRY(nnt_layer_ensure(l, &lo->gain[i], NNT_FP32, m->ndim, m->shape, m->tile));
    NNT_TRY(nnt_layer_ensure(l, &lo->rinv[i], NNT_FP32, m->ndim, m->shape, m->tile));
    NNT_TRY(nnt_tensor_rsqrt_mul(lo->m[i], lo->n2[i], lo->gain[i]));
    return nnt_tensor_rsqrt_mul(NULL, lo->n2[i], lo->rinv[i]);
}

int gl_lora_dora_init(nnt_layer *l, gl_lora *lo)
{
    for (int i = 0; lo->dora && i < lo->nparts; i++) {
        /* m from the norms (dora_gains): now, or, a base initialised or read later, by the
         * first forward or merge */
        nnt_tensor_invalidate(lo->m[i]);
        if (lo->base[i]->written)
            NNT_TRY(dora_gains(l, lo, i));
    }
    return NNT_OK;
}

/* y_i (rows..., out_i...) holding x W_i^T + b_i + s u B_i^T becomes DoRA's output; w the
 * weight its product read. */
static int dora_forward(nnt_layer *l, gl_lora *lo, int i, nnt_tensor *y, nnt_tensor *w)
{
    /* generation after its first forward (weights_fixed): the gains of that forward */
    if (!(l->ctx->weights_fixed && lo->gain[i] && lo->gain[i]->written))
        NNT_TRY(dora_gains(l, lo, i));
    NNT_TRY(nnt_layer_ensure(l, &lo->t[i], NNT_FP32, y->ndim, y->shape, y->tile));
    lo->wop[i] = w;
    if (lo->dropped) {   /* t = x' W^T + s u B^T */
        NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, 1.0, lo->x, w, 0.0, lo->t[i],
                                lo->in_dims, 0));
        NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, lo->scale, lo->u, lo->b[i], 1.0,
                                lo->t[i], 1, 0));
    } else {   /* t = y - b */
        NNT_TRY(nnt_tensor_copy(y, lo->t[i]));
        if (lo->bias[i]) {
            const nnt_tensor *b = lo->bias[i];
            NNT_TRY(nnt_layer_ensure(l, &lo->nbias[i], NNT_FP32, b->ndim, b->shape, b->tile));
            NNT_TRY(nnt_tensor_convert(lo->bias[i], lo->nbias[i]));
            NNT_TRY(nnt_tensor_scale(lo->nbias[i], -1.0));
            NNT_TRY(nnt_tensor_add_broadcast(lo->nbias[i], lo->t[i]));
        }
    }
    /* y += (g - 1) t */
    return nnt_tensor_mul_broadcast(lo->t[i], lo->gain[i], -1.0, 0, 1.0, y);
}

int gl_lora_part(nnt_layer *l, gl_lora *lo, int i, nnt_tensor *y, double beta, nnt_tensor *w)
{
    if (lo->dora && beta != 1.0)
        return nnt_fail(l->ctx, NNT_E_STATE, "nnt: a DoRA adapter's output added before "
                        "the base product's");
    /* y (rows..., out_i...) = s u (rows..., r) B_i^T (out_i..., r) + beta y */
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, lo->scale, lo->u, lo->b[i], beta, y, 1, 0));
    return lo->dora ? dora_forward(l, lo, i, y, w) : NNT_OK;
}

/* DoRA's part of the backward of part i with g: dm_i; *ga the gradient the adapter's
 * products take (g g_i); the base map's (g_base) or the finish's share (h_i). */
static int dora_backward(nnt_layer *l, gl_lora *lo, int i, nnt_tensor *g, nnt_tensor **ga,
                         nnt_tensor **g_base)
{
    nnt_tensor *dm = nnt_layer_grad_of(l, lo->m[i]);
    if (dm)   /* dm (out_i...) (+)= sum over rows of g t / norm */
        NNT_TRY(nnt_tensor_dot_leading(g, lo->t[i], lo->rinv[i], nnt_layer_grad_beta(l, dm),
                                       dm));
    nnt_temp_release(lo->gs[i]);
    nnt_temp_release(lo->h[i]);
    lo->gs[i] = lo->h[i] = NULL;
    NNT_TRY(nnt_temp_create(l->ctx, NNT_FP32, g->ndim, g->shape, g->tile, &lo->gs[i]));
    NNT_TRY(nnt_tensor_mul_broadcast(g, lo->gain[i], 0.0, 0, 0.0, lo->gs[i]));
    *ga = lo->gs[i];
    if (g_base && !lo->dropped) {   /* the base map's products take g g_i: nothing left */
        *g_base = lo->gs[i];
        return NNT_OK;
    }
    NNT_TRY(nnt_temp_create(l->ctx, NNT_FP32, g->ndim, g->shape, g->tile, &lo->h[i]));
    return nnt_tensor_mul_broadcast(g, lo->gain[i], -1.0, 0, 0.0, lo->h[i]);
}

int gl_lora_backward_part(nnt_layer *l, gl_lora *lo, int i, nnt_tensor *g, nnt_tensor **g_base)
{
    int rows = (int)rows_of(lo, lo->x);
    if (g_base)
        *g_base = g;
    if (lo->dora)
        NNT_TRY(dora_backward(l, lo, i, g, &g, g_base));
    if (i == 0)
        NNT_TRY(nnt_layer_ensure(l, &lo->du, NNT_FP32, lo->u->ndim, lo->u->shape, lo->u->tile));
    /* dB_i (out_i..., r) (+)= s g^T (rows..., out_i...) u (rows..., r) */
    nnt_tensor *db = nnt_layer_grad_of(l, lo->b[i]);
    if (db)
        NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, lo->scale, g, lo->u,
                                nnt_layer_grad_beta(l, db), db, rows, 0));
    /* du (rows..., r) (+)= s g B_i */
    return nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, lo->scale, g, lo->b[i], i ? 1.0 : 0.0,
                           lo->du, g->ndim - rows, 0);
}

/* dx' (+)= h_i W_i for DoRA's parts whose base products took g (h_i: (g_i - 1) g), and
 * dW_i += h_i^T x' (x' the adapter's input); the temporaries released. */
static int dora_finish(gl_lora *lo, nnt_tensor *dx)
{
    int rows = (int)rows_of(lo, lo->x);
    for (int i = 0; i < lo->nparts; i++) {
        if (lo->h[i]) {
            int out_dims = lo->h[i]->ndim - rows;
            NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, lo->h[i], lo->wop[i], 1.0, dx,
                                    out_dims, 0));
            nnt_tensor *dw = nnt_layer_grad_of(lo->owner[i], lo->base[i]);
            if (dw)
                NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, lo->h[i], lo->x,
                                        nnt_layer_grad_beta(lo->owner[i], dw), dw, rows, 0));
        }
        nnt_temp_release(lo->gs[i]);
        nnt_temp_release(lo->h[i]);
        lo->gs[i] = lo->h[i] = NULL;
    }
    return NNT_OK;
}

int gl_lora_backward_finish(nnt_layer *l, gl_lora *lo, nnt_tensor *dx)
{
    int rows = (int)rows_of(lo, lo->x);
    /* dA (r, in...) (+)= du^T (rows..., r) x (rows..., in...) (x after its dropout) */
    nnt_tensor *da = nnt_layer_grad_of(l, lo->a);
    if (da)
        NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, lo->du, lo->x,
                                nnt_layer_grad_beta(l, da), da, rows, 0));
    if (!lo->dropped) {   /* dx (rows..., in...) += du A (+ DoRA's h W) */
        NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, lo->du, lo->a, 1.0, dx, 1, 0));
        return lo->dora ? dora_finish(lo, dx) : NNT_OK;
    }
    /* dx += dropout(du A (+ DoRA's h W)), the forward's mask */
    NNT_TRY(nnt_layer_ensure(l, &lo->dxd, NNT_FP32, dx->ndim, dx->shape, dx->tile));
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, lo->du, lo->a, 0.0, lo->dxd, 1, 0));
    if (lo->dora)
        NNT_TRY(dora_finish(lo, lo->dxd));
    NNT_TRY(nnt_tensor_dropout(lo->dxd, mask_seed(l, lo), lo->dropout, lo->dxd));
    lo->passes++;   /* the next forward: a new mask */
    return nnt_tensor_axpby(1.0, lo->dxd, 1.0, dx);
}

int gl_lora_merge(nnt_layer *l, gl_lora *lo, int i, nnt_tensor *w)
{
    /* W_i (out_i..., in...) += s B_i (out_i..., r) A (r, in...); a W kept in bf16 (a frozen
     * base under bf16 products) or NF4: widened, the sum in fp32, rounded once to bf16 again
     * (or quantized again, as PEFT merges into a 4-bit base). DoRA: the norms first, then
     * each row of the sum times m / norm (PEFT's merge). */
    nnt_dtype kept = w->dtype;
    if (lo->dora)
        NNT_TRY(dora_gains(l, lo, i));
    NNT_TRY(nnt_tensor_retype(w, NNT_FP32));
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, lo->scale, lo->b[i], lo->a, 1.0, w, 1, 0));
    if (lo->dora)
        NNT_TRY(nnt_tensor_mul_broadcast(w, lo->gain[i], 0.0, 1, 0.0, w));
    return nnt_tensor_retype(w, kept);
}

/* ---- dispatch to the kinds -------------------------------------------------------------- */

const char *const *gl_lora_modules(const nnt_layer *l)
{
    switch (l->vt->kind) {
    case NNT_LAYER_LINEAR:
        return gl_linear_lora_modules(l);
    case NNT_LAYER_ATTENTION:
        return gl_attention_lora_modules(l);
    case NNT_LAYER_MLP:
        return gl_mlp_lora_modules(l);
    default:
        return NULL;
    }
}

int gl_lora_attach(nnt_layer *l, const char *module, int64_t rank, double scale)
{
    if (l->vt->kind == NNT_LAYER_LINEAR)
        return gl_linear_lora_attach(l, rank, scale);
    if (l->vt->kind == NNT_LAYER_MLP)
        return gl_mlp_lora_attach(l, rank, scale);
    return gl_attention_lora_attach(l, module, rank, scale);
}

gl_lora *gl_lora_of(nnt_layer *l, const char *module)
{
    if (l->vt->kind == NNT_LAYER_LINEAR)
        return gl_linear_lora_of(l);
    if (l->vt->kind == NNT_LAYER_ATTENTION)
        return gl_attention_lora_of(l, module);
    if (l->vt->kind == NNT_LAYER_MLP)
        return gl_mlp_lora_of(l);
    return NULL;
}

int gl_lora_merge_all(nnt_layer *l)
{
    if (l->vt->kind == NNT_LAYER_LINEAR)
        return gl_linear_lora_merge(l);
    if (l->vt->kind == NNT_LAYER_ATTENTION)
        return gl_attention_lora_merge(l);
    if (l->vt->kind == NNT_LAYER_MLP)
        return gl_mlp_lora_merge(l);
    return NNT_OK;
}

void gl_lora_remove(nnt_layer *l, const char *module)
{
    if (l->vt->kind == NNT_LAYER_LINEAR)
        gl_linear_lora_remove(l);
    else if (l->vt->kind == NNT_LAYER_ATTENTION)
        gl_attention_lora_remove(l, module);
    else if (l->vt->kind == NNT_LAYER_MLP)
        gl_mlp_lora_remove(l);
}
