/* SPDX-License-Identifier: MIT */
/* The GPT layer kind (NNT_LAYER_GPT) and the nnt_gpt_* functions of nnt.h: a whole GPT-2
 * (embedding, L pre-LN blocks, final LayerNorm, tied LM head, cross-entropy) as one layer
 * without children. It holds the GPT-2 tree of generic layers that lib/models/transformer.c
 * builds (nnt_model_build_tree), where all of the math lives, and adds none: it registers
 * the tree's parameters (same tensors, names, order, decay flags and init rules), checks
 * that tokens and targets are (B, T), copies the tokens into the model's tiling and
 * forwards the rest to the tree. Files (llm.c, safetensors) and generation are the model
 * code's (lib/models/llmc.c, hf.c, generate.c), which reads the parameters by name. */
#include "../layers/layer.h"

#include "models.h"

#include <stdlib.h>
#include <string.h>

typedef struct gpt_impl {
    nnt_layer *tree;         /* NNT_LAYER_MODEL of the GPT-2 configuration (owned)           */
    int64_t B, T, layers;
    nnt_tiling tile;         /* the model's tiling, every entry > 0                          */
    nnt_tensor *tokens;      // (B, T) int32, batch/seq tiles of the model
    int targets_set;         /* nnt_layer_set_targets gave targets (not NULL)                */
    int last_had_targets;    /* the last forward computed a loss (and can be backpropagated) */
} gpt_impl;

static gpt_impl *impl_of(const nnt_layer *l)
{
    return (gpt_impl *)l->impl;
}

/* ---- presets and configurations --------------------------------------------------------- */

/* The GPT-2 presets of nnt_model_preset (lib/models/transformer.c holds the table). */
NNT_API int nnt_gpt_preset(const char *name, nnt_gpt_config *cfg)
{
    const char *fn = "nnt_gpt_preset";
    if (!name || !cfg)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn, name ? "cfg" : "name");
    nnt_model_config c;
    if (nnt_model_preset(name, &c) != NNT_OK || c.family != NNT_FAMILY_GPT2)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: unknown preset '%s' (valid: gpt2, gpt2-medium, "
                        "gpt2-large, gpt2-xl, tiny)", fn, name);
    nnt_gpt_config g = {sizeof(nnt_gpt_config), c.vocab, c.max_seq, c.layers, c.heads,
                        c.channels};
    *cfg = g;
    return NNT_OK;
}

/* cfg is a readable nnt_gpt_config with a valid model for (B, T). */
static int check_config(nnt_ctx *ctx, const char *fn, const nnt_gpt_config *cfg, int64_t B,
                        int64_t T)
{
    if (!cfg)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: cfg is NULL", fn);
    if (cfg->size < sizeof(nnt_gpt_config))
        return nnt_fail(ctx, NNT_E_INVAL, "%s: cfg->size %zu < sizeof(nnt_gpt_config) %zu "
                        "(initialise it with NNT_GPT_CONFIG_INIT or nnt_gpt_preset)", fn,
                        cfg->size, sizeof(nnt_gpt_config));
    if (cfg->vocab < 1 || cfg->max_seq < 1 || cfg->layers < 0 || cfg->heads < 1 ||
        cfg->channels < 1)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: bad configuration vocab=%lld max_seq=%lld "
                        "layers=%lld heads=%lld channels=%lld", fn, (long long)cfg->vocab,
                        (long long)cfg->max_seq, (long long)cfg->layers,
                        (long long)cfg->heads, (long long)cfg->channels);
    if (cfg->channels % cfg->heads)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: channels=%lld is not a multiple of heads=%lld",
                        fn, (long long)cfg->channels, (long long)cfg->heads);
    if (B < 1 || T < 1 || T > cfg->max_seq)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: B=%lld, T=%lld must be positive with T <= "
                        "max_seq=%lld", fn, (long long)B, (long long)T,
                        (long long)cfg->max_seq);
    return NNT_OK;
}

/* The nnt_model_config of a GPT-2 configuration. */
static nnt_model_config model_config(const nnt_gpt_config *cfg)
{
    return nnt_gpt2_model_config(cfg->vocab, cfg->max_seq, cfg->layers, cfg->heads,
                                 cfg->channels);
}

/* ---- tiling ---------------------------------------------------------------------------- */

NNT_API int nnt_gpt_tiling(nnt_ctx *ctx, const nnt_gpt_config *cfg, int64_t B, int64_t T,
                           const nnt_tiling *overrides, nnt_tiling *out)
{
    const char *fn = "nnt_gpt_tiling";
    NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    NNT_TRY(check_config(ctx, fn, cfg, B, T));
    nnt_model_dims d = {B, T, cfg->channels, 4 * cfg->channels, cfg->vocab, cfg->heads, 0};
    return nnt_model_resolve_tiling(ctx, fn, &d, overrides, out);
}

/* ---- the layer's vtable ------------------------------------------------------------------ */

static int check_ids(nnt_layer *l, const char *fn, const char *role, nnt_tensor *x)
{
    gpt_impl *g = impl_of(l);
    NNT_TRY(nnt_check_dtype(fn, role, x, NNT_INT32));
    if (x->ndim != 2 || x->shape[0] != g->B || x->shape[1] != g->T) {
        char got[64] = "";
        size_t n = 0;
        for (int d = 0; d < x->ndim && n < sizeof got; d++)
            n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld", d ? ", " : "",
                                  (long long)x->shape[d]);
        return nnt_fail(l->ctx, NNT_E_SHAPE, "%s: %s are (%s), this gpt layer was created "
                        "for (B, T) = (%lld, %lld)", fn, role, got, (long long)g->B,
                        (long long)g->T);
    }
    return NNT_OK;
}

/* The tokens (B, T), any tiling, go to the tree in the model's tiling; it returns the
 * logits (B, T, V) and, with targets set, computes the loss. */
static int gpt_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    gpt_impl *g = impl_of(l);
    NNT_TRY(check_ids(l, "nnt_layer_forward", "tokens", x));
    g->last_had_targets = 0;
    NNT_TRY(nnt_tensor_copy(x, g->tokens));
    NNT_TRY(nnt_layer_forward(g->tree, g->tokens, y));
    g->last_had_targets = g->targets_set;
    return NNT_OK;
}

static int gpt_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    (void)dy;   /* NULL: the framework requires it for a layer with targets */
    gpt_impl *g = impl_of(l);
    if (!g->last_had_targets)
        return nnt_fail(l->ctx, NNT_E_STATE, "nnt_layer_backward: the last forward of this gpt "
                        "layer had no targets (set them with nnt_layer_set_targets first)");
    NNT_TRY(nnt_layer_backward(g->tree, NULL, NULL));
    g->last_had_targets = 0;
    *dx = NULL;   /* tokens have no gradient */
    return NNT_OK;
}

static int gpt_set_targets(nnt_layer *l, nnt_tensor *targets)
{
    gpt_impl *g = impl_of(l);
    if (targets) {
        NNT_TRY(nnt_tensor_check_readable(targets, "nnt_layer_set_targets"));
        NNT_TRY(check_ids(l, "nnt_layer_set_targets", "targets", targets));
    }
    NNT_TRY(nnt_layer_set_targets(g->tree, targets));
    g->targets_set = targets != NULL;
    return NNT_OK;
}

static int gpt_loss(nnt_layer *l, double *loss)
{
    return nnt_layer_loss(impl_of(l)->tree, loss);
}

static int gpt_has_targets(const nnt_layer *l)
{
    (void)l;
    return 1;   /* a GPT always ends in its cross-entropy */
}

static int64_t gpt_num_blocks(const nnt_layer *l)
{
    return impl_of(l)->layers;
}

static int gpt_clear_grad(nnt_layer *l)
{
    return nnt_layer_clear_grad(impl_of(l)->tree);
}

static void gpt_destroy(nnt_layer *l)
{
    gpt_impl *g = impl_of(l);
    nnt_tensor_destroy(g->tokens);
    nnt_layer_destroy(g->tree);
    g->tokens = NULL;
    g->tree = NULL;
}

static nnt_layer *gpt_inner(nnt_layer *l)
{
    return impl_of(l)->tree;
}

static int register_params(nnt_layer *l, nnt_layer *tree);

/* The tree's parameters changed (frozen, adapters added or merged): register them again. */
static int gpt_reregister(nnt_layer *l)
{
    for (int i = 0; i < l->nparams; i++)
        free(l->params[i].name);
    l->nparams = 0;
    nnt_layer_params_changed(l);
    nnt_layer_params_changed(impl_of(l)->tree);
    return register_params(l, impl_of(l)->tree);
}

static const nnt_layer_vt GPT_VT = {
    NNT_LAYER_GPT, "gpt", gpt_forward, gpt_backward, gpt_set_targets, gpt_loss,
    gpt_has_targets, gpt_num_blocks, gpt_destroy, gpt_clear_grad, gpt_inner, gpt_reregister,
};

/* ---- creation ------------------------------------------------------------------------------ */

/* Register every parameter of the tree, in its order, under its name (not owned). */
static int register_params(nnt_layer *l, nnt_layer *tree)
{
    int64_t count = 0;
    NNT_TRY(nnt_layer_num_params(tree, &count, NULL));
    for (int64_t i = 0; i < count; i++) {
        const nnt_layer_param_rec *p = tree->listed[i];
        NNT_TRY(nnt_layer_add_param(l, tree->listed_names[i], p->value, p->grad, p->decay,
                                    p->init, 0));
        l->params[l->nparams - 1].frozen = p->frozen;
        l->params[l->nparams - 1].adapter = p->adapter;
    }
    return NNT_OK;
}

/* The layer around tree (taken over: destroyed on failure too), for (B, T) tiled as t. */
static int wrap_tree(nnt_ctx *ctx, nnt_layer *tree, int64_t B, int64_t T, const nnt_tiling *t,
                     const char *fn, nnt_layer **out)
{
    nnt_layer *l = NULL;
    int rc = nnt_layer_new(ctx, &GPT_VT, sizeof(gpt_impl), fn, &l);
    if (rc) {
        nnt_layer_destroy(tree);
        return rc;
    }
    gpt_impl *g = impl_of(l);
    g->tree = tree;
    nnt_model_config c;
    g->B = B;
    g->T = T;
    g->tile = *t;
    rc = nnt_model_config_get(tree, fn, &c);
    g->layers = c.layers;
    int64_t shape[2] = {B, T}, tile[2] = {t->batch, t->seq};
    if (rc == 0)
        rc = nnt_tensor_create_placed(ctx, NNT_INT32, 2, shape, tile, NNT_ROWS_BT,
                                      &g->tokens);
    if (rc == 0)
        rc = register_params(l, tree);
    if (rc) {
        nnt_layer_destroy(l);
        return rc;
    }
    *out = l;   /* initialised already: the tree was, with the same names and rules */
    return NNT_OK;
}

int nnt_gpt_layer_new(nnt_ctx *ctx, const char *fn, const nnt_model_config *cfg, int64_t B,
                      int64_t T, const nnt_tiling *tiling, nnt_layer **out)
{
    nnt_tiling t;
    nnt_model_dims d = {B, T, cfg->channels, 4 * cfg->channels, cfg->vocab, cfg->heads, 0};
    NNT_TRY(nnt_model_resolve_tiling(ctx, fn, &d, tiling, &t));
    nnt_layer *tree = NULL;
    NNT_TRY(nnt_model_build_tree(ctx, fn, cfg, B, T, &t, &tree));
    return wrap_tree(ctx, tree, B, T, &t, fn, out);
}

NNT_API int nnt_gpt_create(nnt_ctx *ctx, const nnt_gpt_config *cfg, int64_t B, int64_t T,
                           const nnt_tiling *tiling, nnt_layer **out)
{
    const char *fn = "nnt_gpt_create";
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    NNT_TRY(check_config(ctx, fn, cfg, B, T));
    nnt_model_config c = model_config(cfg);
    return nnt_gpt_layer_new(ctx, fn, &c, B, T, tiling, out);
}

static int check_gpt(const nnt_layer *gpt, const char *fn)
{
    NNT_TRY(nnt_layer_check(gpt, fn));
    if (gpt->vt != &GPT_VT)
        return nnt_fail(gpt->ctx, NNT_E_INVAL, "%s: a %s layer is not a gpt layer", fn,
                        gpt->vt->kind_name);
    return NNT_OK;
}

nnt_layer *nnt_gpt_tree(nnt_layer *gpt, int64_t *T)
{
    if (gpt->vt != &GPT_VT)
        return NULL;
    gpt_impl *g = impl_of(gpt);
    if (T)
        *T = g->T;
    return g->tree;
}

void nnt_gpt_cancel_backward(nnt_layer *gpt)
{
    if (gpt->vt != &GPT_VT)
        return;
    gpt->forward_pending = 0;
    impl_of(gpt)->last_had_targets = 0;
}

NNT_API int nnt_gpt_config_of(const nnt_layer *gpt, nnt_gpt_config *cfg)
{
    const char *fn = "nnt_gpt_config_of";
    NNT_TRY(check_gpt(gpt, fn));
    if (!cfg)
        return nnt_fail(gpt->ctx, NNT_E_INVAL, "%s: cfg is NULL", fn);
    nnt_model_config c;
    NNT_TRY(nnt_model_config_get(impl_of(gpt)->tree, fn, &c));
    nnt_gpt_config r = {sizeof(nnt_gpt_config), c.vocab, c.max_seq, c.layers, c.heads,
                        c.channels};
    *cfg = r;
    return NNT_OK;
}

NNT_API int nnt_gpt_set_recompute(nnt_layer *gpt, int enable)
{
    const char *fn = "nnt_gpt_set_recompute";
    NNT_TRY(check_gpt(gpt, fn));
    gpt_impl *g = impl_of(gpt);
    if (gpt->forward_pending && g->last_had_targets)
        return nnt_fail(gpt->ctx, NNT_E_STATE, "%s: between a forward with targets and its "
                        "backward (run the backward first)", fn);
    if (g->layers == 0)   /* no block: nothing to recompute, nothing to refuse */
        return NNT_OK;
    int rc = nnt_layer_set_recompute(g->tree, enable);
    if (rc) {
        char text[NNT_ERRMSG_MAX];
        snprintf(text, sizeof text, "%s", nnt_ctx_last_error(gpt->ctx));
        return nnt_fail(gpt->ctx, rc, "%s: %s", fn, text);
    }
    return NNT_OK;
}

/* ---- checkpoints ------------------------------------------------------------------------------ */

NNT_API int nnt_gpt_load_llmc(nnt_ctx *ctx, const char *path, int64_t B, int64_t T,
                              const nnt_tiling *tiling, nnt_layer **out)
{
    return nnt_model_load_llmc(ctx, "nnt_gpt_load_llmc", path, B, T, tiling, 0, out);
}

NNT_API int nnt_gpt_load_safetensors(nnt_ctx *ctx, const char *path,
                                     const nnt_gpt_config *cfg, int64_t B, int64_t T,
                                     const nnt_tiling *tiling, nnt_layer **out)
{
    const char *fn = "nnt_gpt_load_safetensors";
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!path)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    NNT_TRY(check_config(ctx, fn, cfg, B, T));
    nnt_model_config c = model_config(cfg);
    return nnt_model_load_gpt2_st(ctx, fn, path, &c, B, T, tiling, 0, out);
}

NNT_API int nnt_gpt_save_llmc(nnt_layer *gpt, const char *path)
{
    const char *fn = "nnt_gpt_save_llmc";
    NNT_TRY(check_gpt(gpt, fn));
    if (!path)
        return nnt_fail(gpt->ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    return nnt_mpi_saved(gpt->ctx, nnt_model_save_llmc(gpt, fn, path), fn, path);
}

NNT_API int nnt_gpt_save_safetensors(nnt_layer *gpt, const char *path)
{
    const char *fn = "nnt_gpt_save_safetensors";
    NNT_TRY(check_gpt(gpt, fn));
    if (!path)
        return nnt_fail(gpt->ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    return nnt_mpi_saved(gpt->ctx, nnt_model_save_gpt2_st(gpt, fn, path), fn, path);
}

/* ---- generation ------------------------------------------------------------------------------ */

NNT_API int nnt_gpt_generate(nnt_layer *gpt, const int32_t *prompt, int64_t nprompt,
                             int64_t ngen, const nnt_sampling *s, int32_t *out)
{
    const char *fn = "nnt_gpt_generate";
    NNT_TRY(check_gpt(gpt, fn));
    return nnt_model_run_generate(gpt, fn, prompt, nprompt, ngen, s, out);
}
