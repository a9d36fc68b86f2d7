// SPDX-License-Identifier: MIT
/* The mixture-of-experts MLP (NNT_MLP_MOE of nnt_mlp_options): children "gate", the router
 * (linear C -> E, no bias), and "experts.<e>", E SwiGLU MLPs (gate_proj, up_proj, down_proj,
 * C -> I -> C), so that the parameters carry Hugging Face's names
 * ("mlp.gate.weight", "mlp.experts.3.up_proj.weight"). The experts' kind may be gpt-oss's
 * clamped SwiGLU instead (expert_kind, swiglu_alpha, swiglu_limit). With bias, gpt-oss's
 * layout: the router is "router" and has a bias (E), and every expert's three projections
 * have biases. gpt-oss routes by a softmax over the k largest logits, which is the softmax
 * over all E, its top k, renormalised (norm_topk_prob): the same router serves; and
 * down_proj's bias, part of an expert's output, is weighted with it.
 *
 * y[t] = sum over the k experts e chosen for token t of w[t, e] expert_e(x[t]), the experts
 * chosen by torch.topk over softmax(gate(x)) and their weights the chosen probabilities,
 * renormalised to sum 1 if norm_topk_prob. How the tasks follow the run-time counts (a host
 * wait on the routing ids per layer and per forward, then exactly-sized tasks per expert
 * that got tokens): design.md, "Mixture of experts". Under StarPU-MPI the read of the ids
 * is collective (nnt_tensor_copy_to_host gives every rank the whole tensor), so every rank
 * makes the same token lists, the same tensors (tags) and submits the same tasks, each
 * run by the owner of what it writes.
 *
 * The load-balancing loss (transformers' load_balancing_loss_func) couples the MoE layers of
 * a model: aux = E sum_e (c_e / R)(P_e / R), c_e the top-k choices of expert e and P_e the
 * sum of its probabilities over the R = (MoE layers) x (tokens) rows of all MoE layers. Each
 * layer keeps its own c and P of its last forward; gl_moe_aux_loss sums them over a tree,
 * and each layer's backward adds coef d aux / d p = coef E c_e / R^2 (the whole tree's c)
 * to every token's probabilities.
 *
 * With shared_expert_hidden S > 0 (Qwen2-MoE) two more children follow the experts:
 * "shared_expert", a SwiGLU MLP C -> S -> C that every token goes through, and
 * "shared_expert_gate", a linear C -> 1 without bias; the output is the routed sum +
 * sigmoid(shared_expert_gate(x)) shared_expert(x), as transformers' Qwen2MoeSparseMoeBlock
 * adds them. */
#include "generic.h"
#include "../ops/moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct moe {
    int64_t E, k, C, I;
    int64_t S;                     /* the shared expert's inner size (0: none)               */
    int norm;
    int bias;                      /* gpt-oss's layout: "router" with a bias, experts' biases */
    int expert_kind;               /* NNT_MLP_SWIGLU or NNT_MLP_SWIGLU_CLAMP                 */
    double alpha, limit;           /* the latter's swiglu_alpha, swiglu_limit (0: gpt-oss's)  */
    double aux_coef;
    int64_t row_tile;              /* rows of an expert's gathered tiles                     */
    nnt_tensor *x;                 // (B, T, C) the last forward's input (not owned)
    nnt_tensor *probs;             // (B, T, E) softmax of the router's logits
    nnt_tensor *idx;               // (B, T, k) int32 chosen experts
    nnt_tensor *w;                 // (B, T, k) their weights
    nnt_tensor *y;                 // (B, T, C)
    nnt_tensor *dw;                // (B, T, k)
    nnt_tensor *dlogits;           // (B, T, E)
    nnt_tensor *dx;                // (B, T, C) x's layout
    nnt_tensor *shared;            // (B, T, C) the shared expert's output (its child's)
    nnt_tensor *z;                 // (B, T, 1) its gate's logits (its child's)
    nnt_tensor *dshared;           // (B, T, C)
    nnt_tensor *dz;                // (B, T, 1)
    nnt_tensor *dy_cache;
    nnt_tensor **xe;               // E x (n_e, C) the tokens of expert e (NULL if none)
    nnt_tensor **dye;              // E x (n_e, C) their weighted output gradient
    nnt_tensor **ye;               // E x (n_e, C) expert e's output (its down_proj's)
    nnt_moe_rows *rows;            // E token lists of the last forward
    int32_t *host_idx;             // (B T k) the ids on the host
    float *host_probs;             // (B T E) when aux_coef > 0
    int64_t cap_tokens;
    int64_t ntokens;               // B T of the last forward (0: none yet)
    double *count, *psum;          // E: choices and probability sums of the last forward
} moe;

static const nnt_layer_vt moe_vt;

/* ---- the host lists ---------------------------------------------------------------------- */

static int grow(moe *m, int64_t N)
{
    if (N <= m->cap_tokens)
        return NNT_OK;
    int32_t *idx = realloc(m->host_idx, (size_t)(N * m->k) * sizeof *idx);
    if (idx)
        m->host_idx = idx;
    float *p = realloc(m->host_probs, (size_t)(N * m->E) * sizeof *p);
    if (p)
        m->host_probs = p;
    for (int64_t e = 0; idx && p && e < m->E; e++) {
        int32_t *a = realloc(m->rows[e].token, (size_t)N * sizeof *a);
        if (a)
            m->rows[e].token = a;
        int32_t *b = realloc(m->rows[e].slot, (size_t)N * sizeof *b);
        if (b)
            m->rows[e].slot = b;
        if (!a || !b)
            return NNT_E_NOMEM;
    }
    if (!idx || !p)
        return NNT_E_NOMEM;
    m->cap_tokens = N;
    return NNT_OK;
}

/* Wait for the routing and read it: each expert's tokens in token order, its count and, for
 * the auxiliary loss, its probability sum. */
static int read_routing(nnt_layer *l, int64_t N)
{
    moe *m = l->impl;
    if (grow(m, N))
        return nnt_fail(l->ctx, NNT_E_NOMEM, "nnt_layer_forward: out of host memory for the "
                        "routing of %lld tokens", (long long)N);
    NNT_TRY(nnt_tensor_copy_to_host(m->idx, m->host_idx, (size_t)(N * m->k) * sizeof(int32_t)));
    for (int64_t e = 0; e < m->E; e++) {
        m->rows[e].n = 0;
        m->psum[e] = 0.0;
    }
    for (int64_t t = 0; t < N; t++)
        for (int64_t j = 0; j < m->k; j++) {
            int32_t e = m->host_idx[t * m->k + j];
            nnt_moe_rows *r = &m->rows[e];
            r->token[r->n] = (int32_t)t;
            r->slot[r->n++] = (int32_t)j;
        }
    for (int64_t e = 0; e < m->E; e++)
        m->count[e] = (double)m->rows[e].n;
    m->ntokens = N;
    if (m->aux_coef <= 0.0)
        return NNT_OK;
    NNT_TRY(nnt_tensor_copy_to_host(m->probs, m->host_probs,
                                    (size_t)(N * m->E) * sizeof(float)));
    for (int64_t t = 0; t < N; t++)
        for (int64_t e = 0; e < m->E; e++)
            m->psum[e] += m->host_probs[t * m->E + e];
    return NNT_OK;
}

/* ---- forward ----------------------------------------------------------------------------- */

static int moe_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    moe *m = l->impl;
    nnt_tensor *logits = NULL;
    if (x->ndim != 3 || x->shape[2] != m->C)
        return nnt_fail(l->ctx, NNT_E_SHAPE, "nnt_layer_forward: the moe layer takes (B, T, "
                        "C = %lld)", (long long)m->C);
    m->x = x;
    int64_t N = x->shape[0] * x->shape[1];
    NNT_TRY(nnt_layer_forward(l->children[0], x, &logits));   // (B, T, E)
    int64_t kshape[3] = {x->shape[0], x->shape[1], m->k}, ktile[3] = {x->tile[0], x->tile[1], m->k};
    NNT_TRY(nnt_layer_ensure(l, &m->probs, NNT_FP32, 3, logits->shape, logits->tile));
    NNT_TRY(nnt_layer_ensure(l, &m->idx, NNT_INT32, 3, kshape, ktile));
    NNT_TRY(nnt_layer_ensure(l, &m->w, NNT_FP32, 3, kshape, ktile));
    NNT_TRY(nnt_moe_route(logits, m->k, m->norm, m->probs, m->idx, m->w));
    NNT_TRY(read_routing(l, N));
    NNT_TRY(nnt_layer_ensure(l, &m->y, NNT_FP32, 3, x->shape, x->tile));
    NNT_TRY(nnt_tensor_fill(m->y, 0.0));
    for (int64_t e = 0; e < m->E; e++) {
        m->ye[e] = NULL;
        if (!m->rows[e].n)   /* no token: no task */
            continue;
        int64_t shape[2] = {m->rows[e].n, m->C}, tile[2] = {m->row_tile, x->tile[2]};
        NNT_TRY(nnt_layer_ensure(l, &m->xe[e], NNT_FP32, 2, shape, tile));
        NNT_TRY(nnt_moe_gather(x, NULL, &m->rows[e], m->xe[e]));
        NNT_TRY(nnt_layer_forward(l->children[1 + e], m->xe[e], &m->ye[e]));   // (n_e, C)
        NNT_TRY(nnt_moe_scatter_add(m->ye[e], m->w, &m->rows[e], m->y));
    }
    if (m->S) {   /* + sigmoid(shared_expert_gate(x)) shared_expert(x) */
        NNT_TRY(nnt_layer_forward(l->children[1 + m->E], x, &m->shared));   // (B, T, C)
        NNT_TRY(nnt_layer_forward(l->children[2 + m->E], x, &m->z));        // (B, T, 1)
        NNT_TRY(nnt_moe_shared_add(m->z, m->shared, m->y));
    }
    *y = m->y;
    return NNT_OK;
}

/* ---- the auxiliary loss over a tree ------------------------------------------------------- */

typedef struct aux_sum {
    int64_t E, layers, N;
    double coef;
    double *count, *psum;
} aux_sum;

static int collect(const nnt_layer *l, aux_sum *s)
{
    if (l->vt == &moe_vt) {
        const moe *m = l->impl;
        if (m->ntokens && m->aux_coef > 0.0) {
            if (s->layers && (m->E != s->E || m->ntokens != s->N))
                return NNT_E_INVAL;
            s->E = m->E, s->N = m->ntokens, s->coef = m->aux_coef;
            for (int64_t e = 0; e < m->E && s->count; e++) {
                s->count[e] += m->count[e];
                s->psum[e] += m->psum[e];
            }
            s->layers++;
        }
    }
    for (int c = 0; c < l->nchildren; c++)
        NNT_TRY(collect(l->children[c], s));
    return NNT_OK;
}

/* The sums of the tree under root (count, psum: NNT_MOE_MAX_EXPERTS zeroed doubles). */
static int tree_sums(const nnt_layer *root, aux_sum *s, double *count, double *psum)
{
    memset(s, 0, sizeof *s);
    s->count = count, s->psum = psum;
    return collect(root, s);
}

int gl_moe_aux_loss(const nnt_layer *root, double *value)
{
    static double count[NNT_MOE_MAX_EXPERTS], psum[NNT_MOE_MAX_EXPERTS];
    aux_sum s;
    memset(count, 0, sizeof count);
    memset(psum, 0, sizeof psum);
    *value = 0.0;
    if (tree_sums(root, &s, count, psum))
        return nnt_fail(root->ctx, NNT_E_INVAL, "nnt_layer_loss: the model's MoE layers "
                        "differ in experts or tokens");
    if (!s.layers)
        return NNT_OK;
    double R = (double)(s.layers * s.N), sum = 0.0;
    for (int64_t e = 0; e < s.E; e++)
        sum += (count[e] / R) * (psum[e] / R);
    *value = s.coef * (double)s.E * sum;
    return NNT_OK;
}

/* coef d aux / d p_e = coef E c_e / R^2 over l's whole tree (its root), or 0 (no aux). */
static int aux_gradient(nnt_layer *l, float *grad, int *any)
{
    static double count[NNT_MOE_MAX_EXPERTS], psum[NNT_MOE_MAX_EXPERTS];
    const nnt_layer *root = l;
    while (root->parent)
        root = root->parent;
    aux_sum s;
    memset(count, 0, sizeof count);
    memset(psum, 0, sizeof psum);
    *any = 0;
    if (tree_sums(root, &s, count, psum))
        return nnt_fail(l->ctx, NNT_E_INVAL, "nnt_layer_backward: the model's MoE layers "
                        "differ in experts or tokens");
    if (!s.layers)
        return NNT_OK;
    double R = (double)(s.layers * s.N);
    for (int64_t e = 0; e < s.E; e++)
        grad[e] = (float)(s.coef * (double)s.E * count[e] / (R * R));
    *any = 1;
    return NNT_OK;
}

/* ---- backward ---------------------------------------------------------------------------- */

/* A gradient of an expert that got no token: zero if this backward is the first since the
 * gradients were dropped (otherwise it keeps what it has). */
static int zero_unused(nnt_layer *l)
{
    for (int i = 0; i < l->nparams; i++)
        if (l->params[i].grad && nnt_layer_grad_beta(l, l->params[i].grad) == 0.0)
            NNT_TRY(nnt_tensor_fill(l->params[i].grad, 0.0));
    for (int c = 0; c < l->nchildren; c++)
        NNT_TRY(zero_unused(l->children[c]));
    return NNT_OK;
}

/* The shared expert and its gate: their gradients, and their inputs' added to dx. */
static int shared_backward(nnt_layer *l, nnt_tensor *g)
{
    moe *m = l->impl;
    nnt_tensor *d = NULL;
    NNT_TRY(nnt_layer_ensure(l, &m->dshared, NNT_FP32, 3, m->shared->shape, m->shared->tile));
    NNT_TRY(nnt_layer_ensure(l, &m->dz, NNT_FP32, 3, m->z->shape, m->z->tile));
    NNT_TRY(nnt_moe_shared_backward(m->z, m->shared, g, m->dshared, m->dz));
    NNT_TRY(nnt_layer_backward(l->children[1 + m->E], m->dshared, &d));
    NNT_TRY(nnt_tensor_axpby(1.0, d, 1.0, m->dx));
    NNT_TRY(nnt_layer_backward(l->children[2 + m->E], m->dz, &d));
    return nnt_tensor_axpby(1.0, d, 1.0, m->dx);
}

static int moe_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    moe *m = l->impl;
    nnt_tensor *g = NULL, *d = NULL;
    float aux[NNT_MOE_MAX_EXPERTS];
    int with_aux = 0;
    NNT_TRY(gl_dy_like(l, dy, m->y, "nnt_layer_backward", &m->dy_cache, &g));
    NNT_TRY(nnt_layer_ensure(l, &m->dw, NNT_FP32, 3, m->w->shape, m->w->tile));
    NNT_TRY(nnt_tensor_fill(m->dw, 0.0));
    for (int64_t e = 0; e < m->E; e++) {
        if (!m->rows[e].n)
            continue;
        NNT_TRY(nnt_layer_ensure(l, &m->dye[e], NNT_FP32, 2, m->xe[e]->shape, m->xe[e]->tile));
        NNT_TRY(nnt_moe_gather(g, m->w, &m->rows[e], m->dye[e]));
        NNT_TRY(nnt_moe_weight_grad(g, m->ye[e], &m->rows[e], m->dw));
    }
    if (m->aux_coef > 0.0)
        NNT_TRY(aux_gradient(l, aux, &with_aux));
    NNT_TRY(nnt_layer_ensure(l, &m->dlogits, NNT_FP32, 3, m->probs->shape, m->probs->tile));
    NNT_TRY(nnt_moe_route_backward(m->probs, m->idx, m->w, m->norm, m->dw,
                                   with_aux ? aux : NULL, m->dlogits));
    NNT_TRY(nnt_layer_backward(l->children[0], m->dlogits, &d));
    NNT_TRY(nnt_layer_ensure(l, &m->dx, NNT_FP32, 3, m->x->shape, m->x->tile));
    NNT_TRY(nnt_tensor_copy(d, m->dx));
    for (int64_t e = 0; e < m->E; e++) {
        if (!m->rows[e].n) {
            NNT_TRY(zero_unused(l->children[1 + e]));
            continue;
        }
        NNT_TRY(nnt_layer_backward(l->children[1 + e], m->dye[e], &d));
        NNT_TRY(nnt_moe_scatter_add(d, NULL, &m->rows[e], m->dx));
    }
    if (m->S)
        NNT_TRY(shared_backward(l, g));
    *dx = m->dx;
    return NNT_OK;
}

static void moe_destroy(nnt_layer *l)
{
    moe *m = l->impl;
    nnt_tensor *own[] = {m->probs, m->idx,    m->w,       m->y,    m->dw,
                         m->dlogits, m->dx, m->dy_cache, m->dshared, m->dz};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        nnt_tensor_destroy(own[i]);
    for (int64_t e = 0; e < m->E; e++) {
        if (m->xe)
            nnt_tensor_destroy(m->xe[e]);
        if (m->dye)
            nnt_tensor_destroy(m->dye[e]);
        if (m->rows) {
            free(m->rows[e].token);
            free(m->rows[e].slot);
        }
    }
    free(m->xe);
    free(m->dye);
    free(m->ye);
    free(m->rows);
    free(m->host_idx);
    free(m->host_probs);
    free(m->count);
    free(m->psum);
}

static const nnt_layer_vt moe_vt = {
    NNT_LAYER_MLP, "moe", moe_forward, moe_backward, NULL, NULL, NULL, NULL, moe_destroy, NULL,
    NULL, NULL};

/* ---- creation ---------------------------------------------------------------------------- */

static int moe_children(nnt_layer *l, const nnt_tiling *t, const char *fn)
{
    moe *m = l->impl;
    nnt_layer *child = NULL;
    NNT_TRY(gl_linear_new(l->ctx, m->C, m->E, m->bias ? NNT_LINEAR_BIAS : 0,
                          gl_tile(t->channels, m->C), m->E, fn, &child));
    int rc = nnt_layer_add_child(l, m->bias ? "router" : "gate", child);
    if (rc) {
        nnt_layer_destroy(child);
        return rc;
    }
    nnt_mlp_options mo = NNT_MLP_OPTIONS_INIT;
    mo.kind = m->expert_kind;
    mo.bias = m->bias;
    mo.swiglu_alpha = m->alpha;
    mo.swiglu_limit = m->limit;
    mo.fused_gate_up = 1;   /* LoRA: gate_up_proj, as PEFT adapts the experts' stacked tensor */
    for (int64_t e = 0; e < m->E; e++) {
        char name[32];
        snprintf(name, sizeof name, "experts.%lld", (long long)e);
        NNT_TRY(gl_mlp_new(l->ctx, m->C, m->I, &mo, t, fn, &child));
        if ((rc = nnt_layer_add_child(l, name, child))) {
            nnt_layer_destroy(child);
            return rc;
        }
    }
    if (!m->S)
        return NNT_OK;
    mo = (nnt_mlp_options)NNT_MLP_OPTIONS_INIT;   /* Qwen2-MoE's: SwiGLU, no bias */
    mo.kind = NNT_MLP_SWIGLU;
    mo.bias = 0;
    NNT_TRY(gl_mlp_new(l->ctx, m->C, m->S, &mo, t, fn, &child));
    if ((rc = nnt_layer_add_child(l, "shared_expert", child))) {
        nnt_layer_destroy(child);
        return rc;
    }
    NNT_TRY(gl_linear_new(l->ctx, m->C, 1, 0, gl_tile(t->channels, m->C), 1, fn, &child));
    if ((rc = nnt_layer_add_child(l, "shared_expert_gate", child)))
        nnt_layer_destroy(child);
    return rc;
}

int64_t gl_moe_experts(const nnt_layer *l)
{
    return l && l->vt == &moe_vt ? ((const moe *)l->impl)->E : 0;
}

int gl_moe_new(nnt_ctx *ctx, int64_t channels, int64_t hidden, const nnt_mlp_options *o,
               const nnt_tiling *t, const char *fn, nnt_layer **out)
{
    if (o->experts < 1 || o->experts > NNT_MOE_MAX_EXPERTS || o->experts_per_token < 1 ||
        o->experts_per_token > o->experts || hidden < 1 || channels < 1)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: a mixture of experts needs 1 <= "
                        "experts_per_token (%lld) <= experts (%lld) <= %d and a hidden size "
                        "(%lld) >= 1", fn, (long long)o->experts_per_token,
                        (long long)o->experts, NNT_MOE_MAX_EXPERTS, (long long)hidden);
    if (o->shared_expert_hidden < 0)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: shared_expert_hidden %lld must be >= 0 (0: no "
                        "shared expert)", fn, (long long)o->shared_expert_hidden);
    if (!(o->router_aux_coef >= 0.0) || !isfinite(o->router_aux_coef))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: router_aux_coef %g must be finite and >= 0", fn,
                        o->router_aux_coef);
    nnt_layer *l = NULL;
    NNT_TRY(nnt_layer_new(ctx, &moe_vt, sizeof(moe), fn, &l));
    moe *m = l->impl;
    m->E = o->experts, m->k = o->experts_per_token, m->C = channels, m->I = hidden;
    m->S = o->shared_expert_hidden;
    m->norm = o->norm_topk_prob != 0;
    m->bias = o->bias != 0;
    m->expert_kind = o->expert_kind == NNT_MLP_SWIGLU_CLAMP ? NNT_MLP_SWIGLU_CLAMP
                                                            : NNT_MLP_SWIGLU;
    m->alpha = o->swiglu_alpha, m->limit = o->swiglu_limit;
    m->aux_coef = o->router_aux_coef;
    m->row_tile = (t->batch > 0 ? t->batch : 1 << 20) * (t->seq > 0 ? t->seq : 1 << 20);
    if (m->row_tile > ((int64_t)1 << 30))
        m->row_tile = (int64_t)1 << 30;
    size_t E = (size_t)m->E;
    m->xe = calloc(E, sizeof *m->xe);
    m->dye = calloc(E, sizeof *m->dye);
    m->ye = calloc(E, sizeof *m->ye);
    m->rows = calloc(E, sizeof *m->rows);
    m->count = calloc(E, sizeof *m->count);
    m->psum = calloc(E, sizeof *m->psum);
    int rc = m->xe && m->dye && m->ye && m->rows && m->count && m->psum
                 ? moe_children(l, t, fn)
                 : nnt_fail(ctx, NNT_E_NOMEM, "%s: out of host memory", fn);
    if (rc) {
        nnt_layer_destroy(l);
        return rc;
    }
    *out = l;
    return NNT_OK;
}
