/* The generic attention layer: causal multi-head self-attention with its output projection
 * (GPT-2's attn: c_attn split into q, k, v, then c_proj). Shapes: B batch, T sequence,
 * C channels, NH heads, hd = C / NH head dimension. */
#include "generic.h"

#include <math.h>

static const char *const QKV_WEIGHT[3] = {"q.weight", "k.weight", "v.weight"};
static const char *const QKV_BIAS[3] = {"q.bias", "k.bias", "v.bias"};
static const int SWAP_BT_NH[4] = {0, 2, 1, 3};   /* (B, T, NH, hd) <-> (B, NH, T, hd) */

typedef struct attention {
    nnt_tensor *w[3], *dw[3];       // (NH, hd, C) q, k, v weights
    nnt_tensor *b[3], *db[3];       // (NH, hd)
    nnt_tensor *pw, *dpw;           // (C, NH, hd) c_proj weight
    nnt_tensor *pb, *dpb;           // (C)
    nnt_tensor *x;                  // the input of the last forward (not owned)
    nnt_tensor *xin, *x_cache;      // x with the weights' C tiling
    nnt_tensor *heads;              // (B, T, NH, hd) scratch: q/k/v before permute, grads
    nnt_tensor *qkv[3], *o;         // (B, NH, T, hd)
    nnt_tensor *lse;                // (B, NH, T)
    nnt_tensor *atty;               // (B, T, NH, hd) heads side by side
    nnt_tensor *y;                  // (B, T, C)
    nnt_tensor *dh[4];              // (B, NH, T, hd): d o, dq, dk, dv
    nnt_tensor *dxin, *dx, *dy_cache;
} attention;

/* Layouts of the activations for x (B, T, C): heads (B, T, NH, hd), bnth (B, NH, T, hd),
 * lse (B, NH, T). */
static int ensure_acts(nnt_layer *l, attention *a, const nnt_tensor *x)
{
    const nnt_tensor *w = a->w[0];
    int64_t B = x->shape[0], T = x->shape[1], NH = w->shape[0], hd = w->shape[1];
    int64_t bt = x->tile[0], tt = x->tile[1], nt = w->tile[0], dt = w->tile[1];
    int64_t heads[4] = {B, T, NH, hd}, heads_tile[4] = {bt, tt, nt, dt};
    int64_t bnth[4] = {B, NH, T, hd}, bnth_tile[4] = {bt, nt, tt, dt};
    int64_t y[3] = {B, T, a->pw->shape[0]}, y_tile[3] = {bt, tt, a->pw->tile[0]};
    NNT_TRY(nnt_layer_ensure(l, &a->heads, NNT_FP32, 4, heads, heads_tile));
    NNT_TRY(nnt_layer_ensure(l, &a->atty, NNT_FP32, 4, heads, heads_tile));
    for (int i = 0; i < 3; i++)
        NNT_TRY(nnt_layer_ensure(l, &a->qkv[i], NNT_FP32, 4, bnth, bnth_tile));
    NNT_TRY(nnt_layer_ensure(l, &a->o, NNT_FP32, 4, bnth, bnth_tile));
    NNT_TRY(nnt_layer_ensure(l, &a->lse, NNT_FP32, 3, bnth, bnth_tile));
    return nnt_layer_ensure(l, &a->y, NNT_FP32, 3, y, y_tile);
}

static double scale_of(const attention *a)
{
    return 1.0 / sqrt((double)a->w[0]->shape[1]);
}

static int attention_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    attention *a = l->impl;
    int64_t C = a->pw->shape[0];
    if (x->dtype != NNT_FP32 || x->ndim != 3 || x->shape[2] != C)
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: an attention layer takes fp32 "
                        "(B, T, C = %lld) (got %d dims, last %lld)", (long long)C, x->ndim,
                        (long long)x->shape[x->ndim - 1]);
    int64_t tile[3] = {x->tile[0], x->tile[1], a->w[0]->tile[2]};
    NNT_TRY(gl_retiled(l, x, tile, &a->x_cache, &a->xin));
    a->x = x;
    NNT_TRY(ensure_acts(l, a, x));
    for (int i = 0; i < 3; i++) {
        /* heads (B, T, NH, hd) = x (B, T, C) W_i^T (NH, hd, C) + b_i (NH, hd) */
        NNT_TRY(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, a->xin, a->w[i], 0.0, a->heads, 1,
                               0, NNT_EPILOGUE_BIAS, a->b[i], NULL));
        NNT_TRY(nnt_tensor_permute(a->heads, SWAP_BT_NH, a->qkv[i]));
    }
    NNT_TRY(nnt_tensor_attention(a->qkv[0], a->qkv[1], a->qkv[2], scale_of(a), a->o, a->lse));
    NNT_TRY(nnt_tensor_permute(a->o, SWAP_BT_NH, a->atty));
    /* y (B, T, C) = atty (B, T, NH, hd) c_proj^T (C, NH, hd) + c_proj.bias */
    NNT_TRY(nnt_tensor_gemm_ex(NNT_NOTRANS, NNT_TRANS, 1.0, a->atty, a->pw, 0.0, a->y, 2, 0,
                           NNT_EPILOGUE_BIAS, a->pb, NULL));
    *y = a->y;
    return NNT_OK;
}

/* d heads (B, T, NH, hd) of projection i in a->heads: dxin (+)= dheads W_i; W_i, b_i grads. */
static int backward_qkv(attention *a, int i)
{
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, a->heads, a->w[i], i ? 1.0 : 0.0,
                        a->dxin, 2, 0));
    NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, a->heads, a->xin, 1.0, a->dw[i], 2, 0));
    return nnt_tensor_sum_leading(1.0, a->heads, 1.0, a->db[i]);
}

static int attention_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    attention *a = l->impl;
    nnt_tensor *g = NULL;   // (B, T, C)
    NNT_TRY(gl_dy_like(l, dy, a->y, "nnt_layer_backward", &a->dy_cache, &g));
    for (int i = 0; i < 4; i++)
        NNT_TRY(nnt_layer_ensure(l, &a->dh[i], NNT_FP32, 4, a->o->shape, a->o->tile));
    /* c_proj: d atty (B, T, NH, hd) = g c_proj; c_proj grads */
    NNT_TRY(nnt_tensor_gemm(NNT_NOTRANS, NNT_NOTRANS, 1.0, g, a->pw, 0.0, a->heads, 1, 0));
    NNT_TRY(nnt_tensor_gemm(NNT_TRANS, NNT_NOTRANS, 1.0, g, a->atty, 1.0, a->dpw, 2, 0));
    NNT_TRY(nnt_tensor_sum_leading(1.0, g, 1.0, a->dpb));
    NNT_TRY(nnt_tensor_permute(a->heads, SWAP_BT_NH, a->dh[0]));
    NNT_TRY(nnt_tensor_attention_backward(a->qkv[0], a->qkv[1], a->qkv[2], a->o, a->lse, a->dh[0],
                                      scale_of(a), a->dh[1], a->dh[2], a->dh[3]));
    /* d xin (B, T, C) = sum over q, k, v of d heads W_i, in xin's tiling, then x's */
    NNT_TRY(nnt_layer_ensure(l, &a->dxin, NNT_FP32, 3, a->xin->shape, a->xin->tile));
    for (int i = 0; i < 3; i++) {
        NNT_TRY(nnt_tensor_permute(a->dh[i + 1], SWAP_BT_NH, a->heads));
        NNT_TRY(backward_qkv(a, i));
    }
    if (a->xin == a->x) {
        *dx = a->dxin;
        return NNT_OK;
    }
    NNT_TRY(nnt_layer_ensure(l, &a->dx, NNT_FP32, 3, a->x->shape, a->x->tile));
    NNT_TRY(nnt_tensor_copy(a->dxin, a->dx));
    *dx = a->dx;
    return NNT_OK;
}

static void attention_destroy(nnt_layer *l)
{
    attention *a = l->impl;
    nnt_tensor *own[] = {a->x_cache, a->heads, a->qkv[0], a->qkv[1], a->qkv[2], a->o, a->lse,
                         a->atty, a->y, a->dh[0], a->dh[1], a->dh[2], a->dh[3], a->dxin,
                         a->dx, a->dy_cache};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        nnt_tensor_destroy(own[i]);
}

static const nnt_layer_vt attention_vt = {
    NNT_LAYER_ATTENTION, "attention", attention_forward, attention_backward,
    NULL, NULL, NULL, NULL, attention_destroy, NULL};

/* The parameters, in the order q, k, v weights, their biases, c_proj weight and bias. */
static int attention_params(nnt_layer *l, attention *a, int64_t C, int64_t NH,
                            const nnt_tiling *t)
{
    int64_t hd = C / NH, ct = gl_tile(t->channels, C), nt = gl_tile(t->heads, NH);
    int64_t dt = gl_tile(t->head_dim, hd);
    int64_t w[3] = {NH, hd, C}, w_tile[3] = {nt, dt, ct};
    int64_t pw[3] = {C, NH, hd}, pw_tile[3] = {ct, nt, dt};
    for (int i = 0; i < 3; i++)
        NNT_TRY(nnt_layer_new_param(l, QKV_WEIGHT[i], 3, w, w_tile, 1, NNT_INIT_NORMAL, &a->w[i],
                                &a->dw[i]));
    for (int i = 0; i < 3; i++)
        NNT_TRY(nnt_layer_new_param(l, QKV_BIAS[i], 2, w, w_tile, 0, NNT_INIT_ZERO, &a->b[i],
                                &a->db[i]));
    NNT_TRY(nnt_layer_new_param(l, "c_proj.weight", 3, pw, pw_tile, 1, NNT_INIT_NORMAL_PROJ, &a->pw,
                            &a->dpw));
    return nnt_layer_new_param(l, "c_proj.bias", 1, pw, pw_tile, 0, NNT_INIT_ZERO, &a->pb,
                               &a->dpb);
}

int gl_attention_new(nnt_ctx *ctx, int64_t channels, int64_t heads, const nnt_tiling *tiling,
                     const char *fn, nnt_layer **out)
{
    nnt_tiling t;
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &attention_vt, sizeof(attention), fn, &l));
    int rc = gl_tiling(ctx, tiling, fn, &t);
    if (rc == 0 && (channels < 1 || heads < 1 || channels % heads))
        rc = nnt_fail(ctx, NNT_E_INVAL, "%s: channels %lld must be a positive multiple of "
                      "heads %lld", fn, (long long)channels, (long long)heads);
    if (rc == 0)
        rc = attention_params(l, l->impl, channels, heads, &t);
    if (rc) {
        nnt_layer_destroy(l);
        return rc;
    }
    *out = l;
    return NNT_OK;
}

NNT_API int nnt_layer_attention_create(nnt_ctx *ctx, int64_t channels, int64_t heads,
                                       const nnt_tiling *tiling, nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(gl_attention_new(ctx, channels, heads, tiling, "nnt_layer_attention_create", &l));
    return nnt_layer_finish(l, 0, out);
}
