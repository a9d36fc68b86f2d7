/* SPDX-License-Identifier: MIT */
/* The generic composite layers: mlp (c_fc, c_proj; or SwiGLU's / GeGLU's / gpt-oss's
 * clamped SwiGLU's gate_proj, up_proj, down_proj), block (ln_1, attn, ln_2, mlp, with the
 * two residual connections; Llama's input_layernorm, self_attn, post_attention_layernorm,
 * mlp with RMSNorm; Gemma's four norms: input_layernorm, self_attn,
 * post_attention_layernorm, pre_feedforward_layernorm, mlp, post_feedforward_layernorm)
 * and sequential (any chain). Children run through the public
 * nnt_layer_forward / nnt_layer_backward, which keep each child's forward/backward order. */
#include "generic.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ---- chains (mlp, sequential) ------------------------------------------------------------ */

int gl_chain_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y, int window)
{
    nnt_tensor *prev_x = NULL;   // the input of the child submitted last
    for (int i = 0; i < l->nchildren; i++) {
        if (window)
            NNT_TRY(nnt_layer_release_window(l, prev_x));
        prev_x = x;
        NNT_TRY(nnt_layer_forward(l->children[i], x, &x));
    }
    *y = x;
    return NNT_OK;
}

int gl_chain_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx, int window)
{
    nnt_tensor *prev_dy = NULL;   // the incoming gradient of the child submitted last
    for (int i = l->nchildren - 1; i >= 0; i--) {
        if (window)
            NNT_TRY(nnt_layer_release_window(l, prev_dy));
        prev_dy = dy;
        NNT_TRY(nnt_layer_backward(l->children[i], dy, &dy));
    }
    *dx = dy;
    return NNT_OK;
}

/* An MLP's two or three products follow each other closely: no window inside a block. */
static int mlp_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    return gl_chain_forward(l, x, y, 0);
}

static int mlp_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    return gl_chain_backward(l, dy, dx, 0);
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
    NNT_LAYER_MLP, "mlp", mlp_forward, mlp_backward, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL};

/* c_fc (C -> hidden, GELU: act NNT_LINEAR_GELU or _GELU_ERF) and c_proj (hidden -> C, the
 * output projection). */
static int mlp_children(nnt_layer *l, int64_t C, int64_t hidden, unsigned bias, unsigned act,
                        const nnt_tiling *t, const char *fn)
{
    int64_t ct = gl_tile(t->channels, C), ht = gl_tile(t->hidden, hidden);
    nnt_layer *fc = NULL, *proj = NULL;
    NNT_TRY(gl_linear_new(l->ctx, C, hidden, bias | act, ct, ht, fn, &fc));
    NNT_TRY(adopt(l, "c_fc", fc));
    NNT_TRY(gl_linear_new(l->ctx, hidden, C, bias, ht, ct, fn, &proj));
    proj->params[0].init = NNT_INIT_NORMAL_PROJ;   /* "weight" */
    return adopt(l, "c_proj", proj);
}

/* SwiGLU: children gate_proj, up_proj (C -> hidden), down_proj (hidden -> C):
 * y = down_proj(silu(gate_proj(x)) * up_proj(x)). */
enum { GATE, UP, DOWN };

typedef struct swiglu {
    nnt_glu_act act;                // silu(g) * u; GeGLU's gelu_tanh(g) * u (Gemma); or
                                    // gpt-oss's clamped SwiGLU
    int fused;                      // LoRA's gate_proj and up_proj one module gate_up_proj
    gl_lora *lora;                  // that module's adapter (parts gate, up), or NULL
    nnt_tensor *g, *u;              // (..., hidden) the outputs of gate_proj, up_proj (not owned)
    nnt_tensor *h;                  // (..., hidden) act(g, u)
    nnt_tensor *dg, *du;            // (..., hidden)
    nnt_tensor *dx;                 // (..., C) x's layout
    nnt_tensor *x, *xin;            // the input; xin: in the weights' C tiling (not owned)
    nnt_tensor *dxin, *dx_cache;    // the adapter's dx in xin's layout (when xin is not x)
} swiglu;

/* g (+)= s u B_gate^T, u (+)= s u B_up^T of the fused adapter, from x as gate_proj took it
 * (in its weight's C tiling, which is A's) */
static int swiglu_lora_forward(nnt_layer *l, swiglu *m, nnt_tensor *x)
{
    m->x = x;
    m->xin = gl_linear_input(l->children[GATE]);
    NNT_TRY(gl_lora_begin(l, m->lora, m->xin));
    NNT_TRY(gl_lora_part(l, m->lora, 0, m->g, 1.0, gl_linear_operand(l->children[GATE])));
    return gl_lora_part(l, m->lora, 1, m->u, 1.0, gl_linear_operand(l->children[UP]));
}

/* dB, dA of the fused adapter, and m->dx += du A (the children's products took dg, du:
 * DoRA's rest comes with the adapter's) */
static int swiglu_lora_backward(nnt_layer *l, swiglu *m)
{
    NNT_TRY(gl_lora_backward_part(l, m->lora, 0, m->dg, NULL));
    NNT_TRY(gl_lora_backward_part(l, m->lora, 1, m->du, NULL));
    if (m->xin == m->x)
        return gl_lora_backward_finish(l, m->lora, m->dx);
    NNT_TRY(nnt_layer_ensure(l, &m->dxin, NNT_FP32, m->xin->ndim, m->xin->shape, m->xin->tile));
    NNT_TRY(nnt_tensor_fill(m->dxin, 0.0));
    NNT_TRY(gl_lora_backward_finish(l, m->lora, m->dxin));
    return gl_add_into(l, m->dxin, m->dx, &m->dx_cache);
}

static int swiglu_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    swiglu *m = l->impl;
    NNT_TRY(nnt_layer_forward(l->children[GATE], x, &m->g));
    NNT_TRY(nnt_layer_forward(l->children[UP], x, &m->u));
    if (m->lora)
        NNT_TRY(swiglu_lora_forward(l, m, x));
    NNT_TRY(nnt_layer_ensure(l, &m->h, NNT_FP32, m->g->ndim, m->g->shape, m->g->tile));
    NNT_TRY(nnt_tensor_glu(&m->act, m->g, m->u, m->h));
    return nnt_layer_forward(l->children[DOWN], m->h, y);
}

static int swiglu_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    swiglu *m = l->impl;
    nnt_tensor *dh = NULL, *dxg = NULL, *dxu = NULL;
    NNT_TRY(nnt_layer_backward(l->children[DOWN], dy, &dh));
    NNT_TRY(nnt_layer_ensure(l, &m->dg, NNT_FP32, m->g->ndim, m->g->shape, m->g->tile));
    NNT_TRY(nnt_layer_ensure(l, &m->du, NNT_FP32, m->g->ndim, m->g->shape, m->g->tile));
    /* dh has h's layout (down_proj's input) */
    NNT_TRY(nnt_tensor_glu_backward(&m->act, m->g, m->u, dh, m->dg, m->du));
    NNT_TRY(nnt_layer_backward(l->children[GATE], m->dg, &dxg));
    NNT_TRY(nnt_layer_backward(l->children[UP], m->du, &dxu));
    /* dx = dxg + dxu, both in x's layout */
    NNT_TRY(nnt_layer_ensure(l, &m->dx, NNT_FP32, dxg->ndim, dxg->shape, dxg->tile));
    NNT_TRY(nnt_tensor_sum_into(dxu, dxg, m->dx));
    if (m->lora)
        NNT_TRY(swiglu_lora_backward(l, m));
    *dx = m->dx;
    return NNT_OK;
}

static void swiglu_destroy(nnt_layer *l)
{
    swiglu *m = l->impl;
    nnt_tensor *own[] = {m->h, m->dg, m->du, m->dx, m->dxin, m->dx_cache};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        nnt_tensor_destroy(own[i]);
    gl_lora_free(l, m->lora);
    m->lora = NULL;
}

static const nnt_layer_vt swiglu_vt = {
    NNT_LAYER_MLP, "mlp", swiglu_forward, swiglu_backward, NULL, NULL, NULL, NULL,
    swiglu_destroy, NULL, NULL, NULL};

static int swiglu_children(nnt_layer *l, int64_t C, int64_t hidden, unsigned bias,
                           const nnt_tiling *t, const char *fn)
{
    static const char *const names[3] = {"gate_proj", "up_proj", "down_proj"};
    int64_t ct = gl_tile(t->channels, C), ht = gl_tile(t->hidden, hidden);
    for (int i = 0; i < 3; i++) {
        nnt_layer *child = NULL;
        if (i == DOWN)
            NNT_TRY(gl_linear_new(l->ctx, hidden, C, bias, ht, ct, fn, &child));
        else
            NNT_TRY(gl_linear_new(l->ctx, C, hidden, bias, ct, ht, fn, &child));
        if (i == DOWN)
            child->params[0].init = NNT_INIT_NORMAL_PROJ;   /* "weight" */
        NNT_TRY(adopt(l, names[i], child));
    }
    return NNT_OK;
}

/* ---- the fused gate_up_proj adapter (fused_gate_up) --------------------------------------- */

static swiglu *fused_of(const nnt_layer *l)
{
    swiglu *m = l->vt == &swiglu_vt ? l->impl : NULL;
    return m && m->fused ? m : NULL;
}

const char *const *gl_mlp_lora_modules(const nnt_layer *l)
{
    static const char *const fused[] = {"gate_up_proj", NULL};
    return fused_of(l) ? fused : NULL;
}

int gl_mlp_lora_attach(nnt_layer *l, int64_t rank, double scale)
{
    swiglu *m = fused_of(l);
    if (!m)
        return nnt_fail(l->ctx, NNT_E_INVAL, "nnt: this MLP has no module gate_up_proj");
    if (m->lora)
        return nnt_fail(l->ctx, NNT_E_INVAL, "nnt: the MLP's gate_up_proj has a LoRA adapter "
                        "already");
    nnt_tensor *wg = gl_linear_weight(l->children[GATE]);   // (hidden, C)
    nnt_tensor *wu = gl_linear_weight(l->children[UP]);
    gl_lora_spec sp = {"gate_up_proj.", rank, scale, 1, {wg->shape[1]}, {wg->tile[1]}, 2,
                       {1, 1}, {{wg->shape[0]}, {wu->shape[0]}},
                       {{wg->tile[0]}, {wu->tile[0]}}, {"gate", "up"}, {wg, wu},
                       {gl_linear_bias(l->children[GATE]), gl_linear_bias(l->children[UP])},
                       {l->children[GATE], l->children[UP]}};
    return gl_lora_new(l, &sp, &m->lora);
}

gl_lora *gl_mlp_lora_of(nnt_layer *l)
{
    swiglu *m = fused_of(l);
    return m ? m->lora : NULL;
}

void gl_mlp_lora_remove(nnt_layer *l)
{
    swiglu *m = fused_of(l);
    if (m) {
        gl_lora_free(l, m->lora);
        m->lora = NULL;
    }
}

int gl_mlp_lora_merge(nnt_layer *l)
{
    swiglu *m = fused_of(l);
    if (!m || !m->lora)
        return NNT_OK;
    NNT_TRY(gl_lora_merge(l, m->lora, 0, gl_linear_weight(l->children[GATE])));
    NNT_TRY(gl_lora_merge(l, m->lora, 1, gl_linear_weight(l->children[UP])));
    gl_lora_free(l, m->lora);
    m->lora = NULL;
    return NNT_OK;
}

/* The options as the library's structure: a caller's structure that ends before
 * swiglu_alpha (built before those fields) reads the fields after it as 0. */
static int mlp_options(nnt_ctx *ctx, const nnt_mlp_options *opts, const char *fn,
                       nnt_mlp_options *out)
{
    static const nnt_mlp_options gpt2 = NNT_MLP_OPTIONS_INIT;
    *out = gpt2;
    if (!opts)
        return NNT_OK;
    NNT_TRY(nnt_check_struct_size(ctx, fn, "mlp options size", opts->size,
                                  sizeof(nnt_mlp_options),
                                  offsetof(nnt_mlp_options, swiglu_alpha),
                                  "initialise it with NNT_MLP_OPTIONS_INIT"));
    memset(out, 0, sizeof *out);
    memcpy(out, opts, opts->size);
    out->size = sizeof *out;
    if (out->kind != NNT_MLP_GELU && out->kind != NNT_MLP_SWIGLU &&
        out->kind != NNT_MLP_GEGLU && out->kind != NNT_MLP_MOE &&
        out->kind != NNT_MLP_GELU_ERF && out->kind != NNT_MLP_SWIGLU_CLAMP)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: unknown mlp kind %d (NNT_MLP_GELU, "
                        "NNT_MLP_SWIGLU, NNT_MLP_GEGLU, NNT_MLP_MOE, NNT_MLP_GELU_ERF or "
                        "NNT_MLP_SWIGLU_CLAMP)", fn, out->kind);
    if (out->kind == NNT_MLP_MOE && out->expert_kind != 0 &&
        out->expert_kind != NNT_MLP_SWIGLU && out->expert_kind != NNT_MLP_SWIGLU_CLAMP)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: expert_kind %d: a mixture's experts are "
                        "NNT_MLP_SWIGLU (or 0) or NNT_MLP_SWIGLU_CLAMP", fn, out->expert_kind);
    if (out->kind == NNT_MLP_SWIGLU_CLAMP ||
        (out->kind == NNT_MLP_MOE && out->expert_kind == NNT_MLP_SWIGLU_CLAMP)) {
        /* as floats, which the kernels take: positive and finite */
        float a = (float)out->swiglu_alpha, li = (float)out->swiglu_limit;
        if (!(out->swiglu_alpha >= 0.0) || !(out->swiglu_limit >= 0.0) ||
            (out->swiglu_alpha != 0.0 && !(a > 0.0f && isfinite(a))) ||
            (out->swiglu_limit != 0.0 && !(li > 0.0f && isfinite(li))))
            return nnt_fail(ctx, NNT_E_INVAL, "%s: swiglu_alpha %g and swiglu_limit %g must "
                            "be > 0 and finite as floats (0: gpt-oss's %g and %g)", fn,
                            out->swiglu_alpha, out->swiglu_limit, NNT_SWIGLU_CLAMP_ALPHA,
                            NNT_SWIGLU_CLAMP_LIMIT);
    }
    return NNT_OK;
}

/* The gated activation of an MLP of kind (NNT_MLP_SWIGLU, _GEGLU, _SWIGLU_CLAMP) with o's
 * alpha and limit (0: gpt-oss's). */
static nnt_glu_act glu_act(int kind, const nnt_mlp_options *o)
{
    nnt_glu_act a = {NNT_GLU_SILU, 0.0f, 0.0f};
    if (kind == NNT_MLP_GEGLU)
        a.kind = NNT_GLU_GELU_TANH;
    if (kind == NNT_MLP_SWIGLU_CLAMP) {
        a.kind = NNT_GLU_SILU_CLAMP;
        a.alpha = (float)(o->swiglu_alpha != 0.0 ? o->swiglu_alpha : NNT_SWIGLU_CLAMP_ALPHA);
        a.limit = (float)(o->swiglu_limit != 0.0 ? o->swiglu_limit : NNT_SWIGLU_CLAMP_LIMIT);
    }
    return a;
}

int gl_mlp_new(nnt_ctx *ctx, int64_t channels, int64_t hidden, const nnt_mlp_options *opts,
               const nnt_tiling *tiling, const char *fn, nnt_layer **out)
{
    nnt_tiling t;
    nnt_mlp_options o;
    nnt_layer *l = NULL;
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    NNT_TRY(mlp_options(ctx, opts, fn, &o));
    if (o.kind == NNT_MLP_MOE) {
        NNT_TRY(gl_tiling(ctx, tiling, fn, &t));
        return gl_moe_new(ctx, channels, hidden, &o, &t, fn, out);
    }
    int glu = o.kind == NNT_MLP_SWIGLU || o.kind == NNT_MLP_GEGLU ||
              o.kind == NNT_MLP_SWIGLU_CLAMP;
    unsigned bias = o.bias ? NNT_LINEAR_BIAS : 0;
    NNT_TRY(nnt_layer_new(ctx, glu ? &swiglu_vt : &mlp_vt, glu ? sizeof(swiglu) : 0, fn, &l));
    int rc = gl_tiling(ctx, tiling, fn, &t);
    if (glu) {
        ((swiglu *)l->impl)->act = glu_act(o.kind, &o);
        ((swiglu *)l->impl)->fused = o.fused_gate_up != 0;
    }
    if (rc == 0)
        rc = glu ? swiglu_children(l, channels, hidden, bias, &t, fn)
                 : mlp_children(l, channels, hidden, bias,
                                o.kind == NNT_MLP_GELU_ERF ? NNT_LINEAR_GELU_ERF
                                                           : NNT_LINEAR_GELU, &t, fn);
    for (int i = GATE; rc == 0 && glu && o.fused_gate_up && i <= UP; i++)
        gl_linear_no_lora(l->children[i]);
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
    NNT_TRY(gl_mlp_new(ctx, channels, hidden, NULL, tiling, "nnt_layer_mlp_create", &l));
    return nnt_layer_finish(l, 0, out);
}

NNT_API int nnt_layer_mlp_create_ex(nnt_ctx *ctx, int64_t channels, int64_t hidden,
                                    const nnt_mlp_options *opts, const nnt_tiling *tiling,
                                    nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(gl_mlp_new(ctx, channels, hidden, opts, tiling, "nnt_layer_mlp_create_ex", &l));
    return nnt_layer_finish(l, 0, out);
}

/* ---- block -------------------------------------------------------------------------------- */

enum { LN_1, ATTN, LN_2, MLP, POST_ATTN, POST_MLP };

/* The arrangements of a block's norms and parts (nnt_block_options' sandwich_norms and
 * parallel: one norm, or two). */
enum { BLOCK_PRE, BLOCK_SANDWICH, BLOCK_POST, BLOCK_PARALLEL, BLOCK_PARALLEL2 };

typedef struct block {
    int recompute;                  /* keep only y; the backward reruns the forward first */
    int layout;                     /* BLOCK_*: the children as child() says */
    double scale;                   /* the parts' outputs times it before the residual sums */
    nnt_tensor *x;                  // the input of the last forward (not owned)
    nnt_tensor *r2;                 // (B, T, C) x + attn(ln_1(x)); parallel: attn(.) + mlp(.)
    nnt_tensor *y;                  // (B, T, C) r2 + mlp(ln_2(r2)); parallel: r2 + x
    nnt_tensor *dr2, *dx;           // r2's and x's layouts
    nnt_tensor *dy_cache;
    nnt_tensor *gs, *dr2s;          // scale dy and scale dr2 (scale other than 1)
} block;

/* *sum = a + b in a's layout (b in any tiling). */
static int add_to_new(nnt_layer *l, nnt_tensor *a, nnt_tensor *b, nnt_tensor **sum)
{
    NNT_TRY(nnt_layer_ensure(l, sum, NNT_FP32, a->ndim, a->shape, a->tile));
    return nnt_tensor_sum_into(a, b, *sum);
}

/* *sum = b + scale a in a's layout (b in any tiling), as transformers' b + a * scale. */
static int add_scaled_to_new(nnt_layer *l, nnt_tensor *a, nnt_tensor *b, double scale,
                             nnt_tensor **sum)
{
    if (scale == 1.0)
        return add_to_new(l, a, b, sum);
    NNT_TRY(nnt_layer_ensure(l, sum, NNT_FP32, a->ndim, a->shape, a->tile));
    if (nnt_same_layout(a, b))
        return nnt_tensor_axpbyz(scale, a, 1.0, b, *sum);
    NNT_TRY(nnt_tensor_copy(b, *sum));
    return nnt_tensor_axpby(scale, a, 1.0, *sum);
}

/* *out = scale g (g itself when scale is 1; else into *cache, in g's layout). */
static int scaled(nnt_layer *l, nnt_tensor *g, double scale, nnt_tensor **cache,
                  nnt_tensor **out)
{
    *out = g;
    if (scale == 1.0)
        return NNT_OK;
    NNT_TRY(nnt_layer_ensure(l, cache, NNT_FP32, g->ndim, g->shape, g->tile));
    NNT_TRY(nnt_tensor_axpby(scale, g, 0.0, *cache));
    *out = *cache;
    return NNT_OK;
}

/* Child role r of a block, or NULL where it has none: the children are ln_1, attn, ln_2, mlp,
 * or with four norms input, attn, post-attention, pre-feedforward, mlp, post-feedforward, or
 * with the norms after the parts alone attn, mlp, post-attention, post-feedforward, or side
 * by side input, attn, mlp, or side by side on two norms input, post-attention, attn, mlp
 * (HF's orders). */
static nnt_layer *child(nnt_layer *l, int r)
{
    static const int index[5][6] = {{0, 1, 2, 3, -1, -1},   /* role -> child index */
                                    {0, 1, 3, 4, 2, 5},
                                    {-1, 0, -1, 1, 2, 3},
                                    {0, 1, -1, 2, -1, -1},
                                    {0, 2, 1, 3, -1, -1}};
    int i = index[((block *)l->impl)->layout][r];
    return i < 0 ? NULL : l->children[i];
}

/* *y = norm role r of l applied to x, or x where l has no such norm. */
static int norm_or_same(nnt_layer *l, int r, nnt_tensor *x, nnt_tensor **y)
{
    *y = x;
    return child(l, r) ? nnt_layer_forward(child(l, r), x, y) : NNT_OK;
}

/* *d through norm role r of l backward, unchanged where l has no such norm. */
static int norm_backward(nnt_layer *l, int r, nnt_tensor **d)
{
    return child(l, r) ? nnt_layer_backward(child(l, r), *d, d) : NNT_OK;
}

/* The attention of block l on h (with caches at positions at, when not NULL). */
static int attention_forward(nnt_layer *l, nnt_tensor *h, const gl_cache_pos *at,
                             nnt_tensor **y)
{
    return at ? gl_forward_cached(child(l, ATTN), h, at, y)
              : nnt_layer_forward(child(l, ATTN), h, y);
}

/* Side by side: y = (attn(h) + mlp(h2)) + x with h = ln_1(x) and h2 = ln_2(x) where the block
 * has a second norm (GPT-NeoX), else h; transformers' order of the sums (PhiDecoderLayer;
 * GPTNeoXLayer's (mlp + attn) + x is the same). */
static int parallel_compute(nnt_layer *l, nnt_tensor *x, const gl_cache_pos *at)
{
    block *k = l->impl;
    nnt_tensor *h = NULL, *h2 = NULL, *a = NULL, *m = NULL;
    NNT_TRY(norm_or_same(l, LN_1, x, &h));
    NNT_TRY(attention_forward(l, h, at, &a));
    h2 = h;
    if (child(l, LN_2))
        NNT_TRY(nnt_layer_forward(child(l, LN_2), x, &h2));
    NNT_TRY(nnt_layer_forward(child(l, MLP), h2, &m));
    NNT_TRY(add_to_new(l, a, m, &k->r2));
    return add_to_new(l, k->r2, x, &k->y);
}

/* at: NULL, or the positions of a forward with key/value caches (the attention's). */
static int block_compute(nnt_layer *l, nnt_tensor *x, const gl_cache_pos *at)
{
    block *k = l->impl;
    nnt_tensor *h = NULL;
    if (k->layout >= BLOCK_PARALLEL)   /* on one norm or two */
        return parallel_compute(l, x, at);
    NNT_TRY(norm_or_same(l, LN_1, x, &h));
    NNT_TRY(attention_forward(l, h, at, &h));
    NNT_TRY(norm_or_same(l, POST_ATTN, h, &h));
    NNT_TRY(add_scaled_to_new(l, h, x, k->scale, &k->r2));
    NNT_TRY(norm_or_same(l, LN_2, k->r2, &h));
    NNT_TRY(nnt_layer_forward(child(l, MLP), h, &h));
    NNT_TRY(norm_or_same(l, POST_MLP, h, &h));
    return add_scaled_to_new(l, h, k->r2, k->scale, &k->y);
}

/* With recompute, everything but the output is dropped once computed (released: its memory
 * serves the next block); the backward recomputes it from the input (which the previous
 * layer keeps: its output), and drops it again with its own scratch, keeping the output and
 * the input gradient. So at most one block's activations exist at a time. */
static int block_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    block *k = l->impl;
    NNT_TRY(block_compute(l, x, NULL));
    if (k->recompute) {
        nnt_layer_drop_activations(l, k->y, NULL);
        nnt_layer_drop_weight_copies(l);
    }
    k->x = x;
    *y = k->y;
    return NNT_OK;
}

/* Side by side: dh = dattn + dmlp, dx = ln_1'(dh) + dy; with two norms dh = ln_1'(dattn) +
 * ln_2'(dmlp), dx = dh + dy. */
static int parallel_backward(nnt_layer *l, nnt_tensor *g)
{
    block *k = l->impl;
    nnt_tensor *da = NULL, *dm = NULL;
    NNT_TRY(nnt_layer_backward(child(l, MLP), g, &dm));
    NNT_TRY(nnt_layer_backward(child(l, ATTN), g, &da));
    if (child(l, LN_2)) {   /* each part's input gradient through its own norm */
        NNT_TRY(norm_backward(l, LN_2, &dm));
        NNT_TRY(norm_backward(l, LN_1, &da));
        NNT_TRY(add_to_new(l, dm, da, &k->dr2));
        return add_to_new(l, k->dr2, g, &k->dx);
    }
    NNT_TRY(add_to_new(l, da, dm, &k->dr2));
    da = k->dr2;
    NNT_TRY(norm_backward(l, LN_1, &da));
    return add_to_new(l, da, g, &k->dx);
}

/* The gradient through the parts one after the other (each part's times the scale). */
static int serial_backward(nnt_layer *l, nnt_tensor *g)
{
    block *k = l->impl;
    nnt_tensor *d = NULL;
    NNT_TRY(scaled(l, g, k->scale, &k->gs, &d));
    NNT_TRY(norm_backward(l, POST_MLP, &d));
    NNT_TRY(nnt_layer_backward(child(l, MLP), d, &d));
    NNT_TRY(norm_backward(l, LN_2, &d));
    NNT_TRY(add_to_new(l, d, g, &k->dr2));   /* through the residual and through ln_2 */
    NNT_TRY(scaled(l, k->dr2, k->scale, &k->dr2s, &d));
    NNT_TRY(norm_backward(l, POST_ATTN, &d));
    NNT_TRY(nnt_layer_backward(child(l, ATTN), d, &d));
    NNT_TRY(norm_backward(l, LN_1, &d));
    return add_to_new(l, d, k->dr2, &k->dx);
}

static int block_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    block *k = l->impl;
    nnt_tensor *g = NULL;
    /* Recompute: the same kernels on the same tiles, the same bits. Not before the incoming
     * gradient exists: otherwise StarPU would run the recomputes of all blocks as soon as
     * they are submitted (they only read the kept block inputs), every block's activations
     * would be alive at once, and recompute would save no memory. */
    if (k->recompute && dy)
        NNT_TRY(nnt_tensor_wait_written(dy));
    if (k->recompute)
        NNT_TRY(block_compute(l, k->x, NULL));
    NNT_TRY(gl_dy_like(l, dy, k->y, "nnt_layer_backward", &k->dy_cache, &g));
    NNT_TRY(k->layout >= BLOCK_PARALLEL ? parallel_backward(l, g) : serial_backward(l, g));
    /* Nothing of this block is read again before its next forward but its output (the
     * caller's y) and the input gradient: the rest -- forward activations and backward
     * scratch -- is released, so that the next block's backward reuses the memory (StarPU
     * recycles chunks of the same size) instead of every block keeping its own. */
    nnt_layer_drop_activations(l, k->y, k->dx);
    if (k->recompute)   /* else kept for the next forward, which the update keeps current */
        nnt_layer_drop_weight_copies(l);
    *dx = k->dx;
    return NNT_OK;
}

static void block_destroy(nnt_layer *l)
{
    block *k = l->impl;
    nnt_tensor *own[] = {k->r2, k->y, k->dr2, k->dx, k->dy_cache, k->gs, k->dr2s};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        nnt_tensor_destroy(own[i]);
}

static const nnt_layer_vt block_vt = {
    NNT_LAYER_BLOCK, "block", block_forward, block_backward, NULL, NULL, NULL, NULL,
    block_destroy, NULL, NULL, NULL};

int gl_block_set_recompute(nnt_layer *l, int enable)
{
    if (l->vt != &block_vt)
        return 0;
    ((block *)l->impl)->recompute = enable != 0;
    return 1;
}

/* A block of the subtree whose pending backward needs the recompute it has (its
 * activations were dropped), or NULL. */
static const nnt_layer *dropped_pending(const nnt_layer *l)
{
    if (l->vt == &block_vt && l->forward_pending && ((const block *)l->impl)->recompute)
        return l;
    for (int c = 0; c < l->nchildren; c++) {
        const nnt_layer *b = dropped_pending(l->children[c]);
        if (b)
            return b;
    }
    return NULL;
}

static int set_recompute(nnt_layer *l, int enable, int64_t *blocks)
{
    if (l->vt->kind == NNT_LAYER_GPT) {
        NNT_TRY(nnt_gpt_set_recompute(l, enable));
        (*blocks)++;
        return NNT_OK;
    }
    *blocks += gl_block_set_recompute(l, enable);
    for (int c = 0; c < l->nchildren; c++)
        NNT_TRY(set_recompute(l->children[c], enable, blocks));
    return NNT_OK;
}

NNT_API int nnt_layer_set_recompute(nnt_layer *layer, int enable)
{
    const char *fn = "nnt_layer_set_recompute";
    NNT_TRY(nnt_layer_check(layer, fn));
    if (!enable && dropped_pending(layer))
        return nnt_fail(layer->ctx, NNT_E_STATE, "%s: a block's forward dropped its "
                        "activations and its backward has not run yet: run the backward "
                        "first (it recomputes them)", fn);
    int64_t blocks = 0;
    NNT_TRY(set_recompute(layer, enable, &blocks));
    if (blocks == 0)
        return nnt_fail(layer->ctx, NNT_E_INVAL, "%s: the %s layer has no transformer block "
                        "(nothing to recompute)", fn, layer->vt->kind_name);
    return NNT_OK;
}


static int block_children(nnt_layer *l, int64_t C, int64_t NH, int64_t hidden,
                          const nnt_block_options *o, const nnt_tiling *t, const char *fn)
{
    /* by role (LN_1, ATTN, LN_2, MLP, POST_ATTN, POST_MLP), added in child() order */
    static const char *const names[3][6] = {
        {"ln_1", "attn", "ln_2", "mlp", NULL, NULL},
        {"input_layernorm", "self_attn", "post_attention_layernorm", "mlp", NULL, NULL},
        {"input_layernorm", "self_attn", "pre_feedforward_layernorm", "mlp",
         "post_attention_layernorm", "post_feedforward_layernorm"}};
    static const int order[5][6] = {{LN_1, ATTN, LN_2, MLP, -1, -1},
                                    {LN_1, ATTN, POST_ATTN, LN_2, MLP, POST_MLP},
                                    {ATTN, MLP, POST_ATTN, POST_MLP, -1, -1},
                                    {LN_1, ATTN, MLP, -1, -1, -1},
                                    {LN_1, LN_2, ATTN, MLP, -1, -1}};
    static const int nchildren[5] = {4, 6, 4, 3, 4};
    int sw = o->sandwich_norms;
    /* Hugging Face's Llama names for RMSNorm blocks and for those whose attention takes the
     * Llama layout's names (StableLM's LayerNorm blocks); GPT-2's otherwise */
    int hf = o->norm == NNT_NORM_RMSNORM || (o->attention && o->attention->llama_names);
    int layout = o->parallel == 2 ? BLOCK_PARALLEL2 : o->parallel ? BLOCK_PARALLEL : sw;
    ((block *)l->impl)->layout = layout;
    ((block *)l->impl)->scale = o->residual_scale > 0.0 ? o->residual_scale : 1.0;
    for (int j = 0; j < nchildren[layout]; j++) {
        int i = order[layout][j];
        nnt_layer *c = NULL;
        if (i == ATTN)
            NNT_TRY(gl_attention_new(l->ctx, C, NH, o->attention, t, fn, &c));
        else if (i == MLP)
            NNT_TRY(gl_mlp_new(l->ctx, C, hidden, o->mlp, t, fn, &c));
        else if (o->norm == NNT_NORM_RMSNORM)
            NNT_TRY(gl_rmsnorm_new_ex(l->ctx, C, o->norm_eps, o->norm_plus_one, t, fn, &c));
        else
            NNT_TRY(gl_layernorm_new(l->ctx, C, o->norm_eps, t, fn, &c));
        NNT_TRY(adopt(l, names[sw || o->parallel == 1 ? 2 : o->parallel ? 1 : hf][i], c));
    }
    return NNT_OK;
}

static int block_options(nnt_ctx *ctx, const nnt_block_options *opts, const char *fn,
                         nnt_block_options *out)
{
    static const nnt_block_options gpt2 = NNT_BLOCK_OPTIONS_INIT;
    *out = gpt2;
    if (!opts)
        return NNT_OK;
    if (opts->size < sizeof(nnt_block_options))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: block options size %zu is below "
                        "sizeof(nnt_block_options) %zu (use NNT_BLOCK_OPTIONS_INIT)", fn,
                        opts->size, sizeof(nnt_block_options));
    if (opts->norm != NNT_NORM_LAYERNORM && opts->norm != NNT_NORM_RMSNORM)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: unknown norm kind %d (NNT_NORM_LAYERNORM or "
                        "NNT_NORM_RMSNORM)", fn, opts->norm);
    if ((opts->sandwich_norms || opts->norm_plus_one) && opts->norm != NNT_NORM_RMSNORM)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: sandwich_norms and norm_plus_one need "
                        "NNT_NORM_RMSNORM", fn);
    if (opts->sandwich_norms < 0 || opts->sandwich_norms > 2)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: sandwich_norms %d (0: two norms before the "
                        "parts, 1: four, 2: two after the parts)", fn, opts->sandwich_norms);
    if (opts->parallel < 0 || opts->parallel > 2 || (opts->parallel && opts->sandwich_norms))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: parallel %d (0: the parts one after the other, "
                        "1: side by side on one norm, 2: on two; not with sandwich_norms %d)",
                        fn, opts->parallel, opts->sandwich_norms);
    if (!(opts->residual_scale >= 0.0) || !isfinite(opts->residual_scale) ||
        (opts->parallel && opts->residual_scale > 0.0 && opts->residual_scale != 1.0))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: residual_scale %g must be finite and >= 0 (0: "
                        "1), and 1 or 0 with parallel", fn, opts->residual_scale);
    if (!(opts->norm_eps > 0.0) || !isfinite(opts->norm_eps))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: norm_eps %g must be finite and > 0", fn,
                        opts->norm_eps);
    *out = *opts;
    out->size = sizeof *out;
    return NNT_OK;
}

int gl_block_new(nnt_ctx *ctx, int64_t channels, int64_t heads, int64_t hidden,
                 const nnt_block_options *opts, const nnt_tiling *tiling, const char *fn,
                 nnt_layer **out)
{
    nnt_block_options o;
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &block_vt, sizeof(block), fn, &l));
    int rc = block_options(ctx, opts, fn, &o);
    if (rc == 0)
        rc = block_children(l, channels, heads, hidden, &o, tiling, fn);
    if (rc) {
        nnt_layer_destroy(l);
        return rc;
    }
    *out = l;
    return NNT_OK;
}

static int block_new(nnt_ctx *ctx, int64_t channels, int64_t heads, int64_t hidden,
                     const nnt_block_options *opts, const nnt_tiling *tiling, const char *fn,
                     nnt_layer **out)
{
    nnt_layer *l = NULL;
    NNT_TRY(gl_block_new(ctx, channels, heads, hidden, opts, tiling, fn, &l));
    return nnt_layer_finish(l, 0, out);
}

NNT_API int nnt_layer_block_create(nnt_ctx *ctx, int64_t channels, int64_t heads,
                                   int64_t hidden, const nnt_tiling *tiling, nnt_layer **out)
{
    return block_new(ctx, channels, heads, hidden, NULL, tiling, "nnt_layer_block_create", out);
}

NNT_API int nnt_layer_block_create_ex(nnt_ctx *ctx, int64_t channels, int64_t heads,
                                      int64_t hidden, const nnt_block_options *opts,
                                      const nnt_tiling *tiling, nnt_layer **out)
{
    return block_new(ctx, channels, heads, hidden, opts, tiling, "nnt_layer_block_create_ex",
                     out);
}

/* ---- sequential --------------------------------------------------------------------------- */

/* A chain of layers (blocks, typically): under release_weights at most two children's
 * parameter gathers ahead of the computation (nnt_layer_release_window). */
static int sequential_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    return gl_chain_forward(l, x, y, 1);
}

static int sequential_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    return gl_chain_backward(l, dy, dx, 1);
}

static const nnt_layer_vt sequential_vt = {
    NNT_LAYER_SEQUENTIAL, "sequential", sequential_forward, sequential_backward, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL};

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

/* ---- forward with key/value caches ---------------------------------------------------------- */

int gl_forward_cached(nnt_layer *l, nnt_tensor *x, const gl_cache_pos *at, nnt_tensor **y)
{
    NNT_TRY(nnt_layer_check(l, "nnt_layer_forward"));
    switch (l->vt->kind) {
    case NNT_LAYER_EMBEDDING:
        NNT_TRY(gl_embedding_forward_at(l, x, at->past, at->positions, y));
        nnt_layer_release_weights(l);
        return NNT_OK;
    case NNT_LAYER_ATTENTION:
        NNT_TRY(gl_attention_forward_cached(l, x, at, y));
        nnt_layer_release_weights(l);
        return NNT_OK;
    case NNT_LAYER_BLOCK:
        NNT_TRY(block_compute(l, x, at));
        *y = ((block *)l->impl)->y;
        return NNT_OK;
    case NNT_LAYER_SEQUENTIAL:
        for (int i = 0; i < l->nchildren; i++)
            NNT_TRY(gl_forward_cached(l->children[i], x, at, &x));
        *y = x;
        return NNT_OK;
    default:
        return nnt_layer_forward(l, x, y);
    }
}

void gl_release_caches(nnt_layer *l)
{
    if (l->vt->kind == NNT_LAYER_ATTENTION)
        gl_attention_release_cache(l);
    for (int i = 0; i < l->nchildren; i++)
        gl_release_caches(l->children[i]);
}

int gl_expand_caches(nnt_layer *l, int64_t nseq, const int64_t *src)
{
    if (l->vt->kind == NNT_LAYER_ATTENTION)
        NNT_TRY(gl_attention_expand_cache(l, nseq, src));
    for (int i = 0; i < l->nchildren; i++)
        NNT_TRY(gl_expand_caches(l->children[i], nseq, src));
    return NNT_OK;
}
