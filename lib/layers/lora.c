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
 * outputs as they are. */
#include "generic.h"

#include <stdio.h>
#include <stdlib.h>

static int64_t rows_of(const gl_lora *lo, const nnt_tensor *x)
{
    return x->ndim - lo->in_dims;
}

int gl_lora_new(nnt_layer *l, const gl_lora_spec *sp, gl_lora **out)
{
    gl_lora *lo = calloc(1, sizeof *lo);
    if (!lo)
        return nnt_fail(l->ctx, NNT_E_NOMEM, "nnt: out of memory adding a LoRA adapter");
    lo->nparts = sp->nparts;
    lo->in_dims = sp->in_dims;
    lo->scale = sp->scale;
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
    for (int i = 0; i < l->nparams; i++)
        if (l->params[i].value == lo->a || (lo->nparts && l->params[i].value == lo->b[0]) ||
            (lo->nparts > 1 && l->params[i].value == lo->b[1]) ||
            (lo->nparts > 2 && l->params[i].value == lo->b[2]))
            l->params[i].adapter = 1;
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
    nnt_tensor **acts[] = {&lo->u, &lo->du, &lo->xd, &lo->dxd};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        nnt_layer_forget_activation(l, acts[i]);
        nnt_tensor_destroy(*acts[i]);
    }
    nnt_layer_remove_param(l, lo->a);
    for (int i = 0; i < lo->nparts; i++)
        nnt_layer_remove_param(l, lo->b[i]);
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

int gl_lora_part(gl_lora *lo, int i, nnt_tensor *y, double beta)
{
    /* y (rows..., out_i...) = s u (rows..., r) B_i^T (out_i..., r) + beta y */
    return nnt_tensor_gemm(NNT_NOTRANS, NNT_TRANS, lo->scale, lo->u, lo->b[i], beta, y, 1, 0);
}

int gl_lora_backward_part(nnt_layer *l, gl_lora *lo, int i, nnt_tensor *g)
{
    int rows = (int)rows_of(lo, lo->x);
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

int gl_lora_backward_finish(nnt_layer *l, gl_lora *lo, nnt_tensor *dx)
{
    int rows = (int)rows_of(lo, lo->x);
    /* dA (r, in...) (+)= du^T (rows..., r) x (rows..., in...) (x after its dropout) */
    nnt_tensor *da = nnt_layer_grad_of(l, lo->a);
    if (da)
        NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, lo->du, lo->x,
                                nnt_layer_grad_beta(l, da), da, rows, 0));
    if (!lo->dropped)   /* dx (rows..., in...) += du A */
        return nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, lo->du, lo->a, 1.0, dx, 1, 0);
    /* dx += dropout(du A), the forward's mask */
    NNT_TRY(nnt_layer_ensure(l, &lo->dxd, NNT_FP32, dx->ndim, dx->shape, dx->tile));
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, lo->du, lo->a, 0.0, lo->dxd, 1, 0));
    NNT_TRY(nnt_tensor_dropout(lo->dxd, mask_seed(l, lo), lo->dropout, lo->dxd));
    lo->passes++;   /* the next forward: a new mask */
    return nnt_tensor_axpby(1.0, lo->dxd, 1.0, dx);
}

int gl_lora_merge(gl_lora *lo, int i, nnt_tensor *w)
{
    /* W_i (out_i..., in...) += s B_i (out_i..., r) A (r, in...); a W kept in bf16 (a frozen
     * base under bf16 products) or NF4: widened, the sum in fp32, rounded once to bf16 again
     * (or quantized again, as PEFT merges into a 4-bit base) */
    nnt_dtype kept = w->dtype;
    NNT_TRY(nnt_tensor_retype(w, NNT_FP32));
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, lo->scale, lo->b[i], lo->a, 1.0, w, 1, 0));
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
