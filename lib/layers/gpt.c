/* The GPT layer kind (NNT_LAYER_GPT) and the nnt_gpt_* functions of nnt.h: a whole GPT-2
 * (embedding, L pre-LN blocks, final LayerNorm, tied LM head, cross-entropy) as one fused
 * layer. It wraps the fidelity-tested model of lib/models/gpt2.c, whose math it does not
 * repeat: the layer registers the model's parameter tensors under GPT-2's dotted names
 * (owned by the model), forwards tokens to nnt_gpt2_forward and the loss gradient to
 * nnt_gpt2_backward. The same architecture can be assembled from the generic layers
 * (embedding, block, layernorm, lm_head, cross_entropy in a sequential) with the same
 * parameter names; this kind has no children. */
#include "layer.h"

#include "../models/gpt2.h"
#include "../models/models.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct gpt_impl {
    nnt_gpt2 *model;
    int64_t B, T;
    nnt_gpt2_tiling tile;    /* the model's tiling, every entry > 0                          */
    nnt_tensor *targets;     // (B, T) int32, batch/seq tiles of the model; NULL: none set
    int last_had_targets;    /* the last forward computed a loss (and can be backpropagated) */
} gpt_impl;

static gpt_impl *impl_of(const nnt_layer *l)
{
    return (gpt_impl *)l->impl;
}

/* A failure rc of an internal nnt_gpt2_* call, reported again under the public function fn
 * (the internal function's name dropped from the message). */
static int refail(const nnt_ctx *ctx, const char *fn, int rc)
{
    const char *msg = nnt_ctx_last_error(ctx), *text = msg, *colon = strstr(msg, ": ");
    if (strncmp(msg, "nnt_gpt2_", 9) == 0 && colon)
        text = colon + 2;
    return nnt_fail(ctx, rc, "%s: %s", fn, text);
}

/* Run an internal call; on failure return its status with the message under fn. */
#define TRY_AS(ctx, fn, call)                     \
    do {                                          \
        int rc_ = (call);                         \
        if (rc_)                                  \
            return refail((ctx), (fn), rc_);      \
    } while (0)

/* ---- presets and configurations --------------------------------------------------------- */

static const struct preset {
    const char *name;
    int64_t vocab, max_seq, layers, heads, channels;
} PRESETS[] = {
    {"gpt2", 50257, 1024, 12, 12, 768},
    {"gpt2-medium", 50257, 1024, 24, 16, 1024},
    {"gpt2-large", 50257, 1024, 36, 20, 1280},
    {"gpt2-xl", 50257, 1024, 48, 25, 1600},
    {"tiny", 256, 128, 2, 4, 64},
};
#define NPRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))

NNT_API int nnt_gpt_preset(const char *name, nnt_gpt_config *cfg)
{
    const char *fn = "nnt_gpt_preset";
    if (!name || !cfg)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn, name ? "cfg" : "name");
    for (int i = 0; i < NPRESETS; i++) {
        if (strcmp(PRESETS[i].name, name) != 0)
            continue;
        const struct preset *p = &PRESETS[i];
        nnt_gpt_config c = {sizeof(nnt_gpt_config), p->vocab, p->max_seq, p->layers,
                            p->heads, p->channels};
        *cfg = c;
        return NNT_OK;
    }
    return nnt_fail(NULL, NNT_E_INVAL, "%s: unknown preset '%s' (valid: gpt2, gpt2-medium, "
                    "gpt2-large, gpt2-xl, tiny)", fn, name);
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

static nnt_gpt2_config internal_config(const nnt_gpt_config *cfg)
{
    nnt_gpt2_config c = {cfg->vocab, 0, cfg->max_seq, cfg->layers, cfg->heads, cfg->channels};
    return c;
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
    nnt_model_dims d = {B, T, cfg->channels, 4 * cfg->channels, cfg->vocab, cfg->heads};
    return nnt_model_resolve_tiling(ctx, fn, &d, overrides, out);
}

static nnt_gpt2_tiling internal_tiling(const nnt_tiling *t)
{
    nnt_gpt2_tiling r = {t->batch, t->seq, t->channels, t->hidden, t->vocab, t->heads,
                         t->head_dim};
    return r;
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

static int gpt_forward(nnt_layer *l, nnt_tensor *x, nnt_tensor **y)
{
    gpt_impl *g = impl_of(l);
    NNT_TRY(check_ids(l, "nnt_layer_forward", "tokens", x));
    g->last_had_targets = 0;
    TRY_AS(l->ctx, "nnt_layer_forward", nnt_gpt2_forward(g->model, x, g->targets, NULL));
    g->last_had_targets = g->targets != NULL;
    *y = nnt_gpt2_activation(g->model, "logits");   // (B, T, V)
    return NNT_OK;
}

static int gpt_backward(nnt_layer *l, nnt_tensor *dy, nnt_tensor **dx)
{
    (void)dy;   /* NULL: the framework requires it for a layer with targets */
    gpt_impl *g = impl_of(l);
    if (!g->last_had_targets)
        return nnt_fail(l->ctx, NNT_E_STATE, "nnt_layer_backward: the last forward of this gpt "
                        "layer had no targets (set them with nnt_layer_set_targets first)");
    TRY_AS(l->ctx, "nnt_layer_backward", nnt_gpt2_backward(g->model));
    g->last_had_targets = 0;
    *dx = NULL;   /* tokens have no gradient */
    return NNT_OK;
}

static int gpt_set_targets(nnt_layer *l, nnt_tensor *targets)
{
    gpt_impl *g = impl_of(l);
    const char *fn = "nnt_layer_set_targets";
    if (!targets) {
        nnt_tensor_destroy(g->targets);
        g->targets = NULL;
        return NNT_OK;
    }
    NNT_TRY(nnt_tensor_check_readable(targets, fn));
    NNT_TRY(check_ids(l, fn, "targets", targets));
    if (!g->targets) {
        int64_t shape[2] = {g->B, g->T}, tile[2] = {g->tile.batch, g->tile.seq};
        NNT_TRY(nnt_tensor_create(l->ctx, NNT_INT32, 2, shape, tile, &g->targets));
    }
    return nnt_tensor_copy(targets, g->targets);
}

static int gpt_loss(nnt_layer *l, double *loss)
{
    TRY_AS(l->ctx, "nnt_layer_loss", nnt_gpt2_loss(impl_of(l)->model, loss));
    return NNT_OK;
}

static int gpt_has_targets(const nnt_layer *l)
{
    (void)l;
    return 1;   /* a GPT always ends in its cross-entropy */
}

static int64_t gpt_num_blocks(const nnt_layer *l)
{
    nnt_gpt2_config c;
    nnt_gpt2_get_config(impl_of(l)->model, &c);
    return c.layers;
}

static int gpt_clear_grad(nnt_layer *l)
{
    TRY_AS(l->ctx, "nnt_layer_clear_grad", nnt_gpt2_clear_grad(impl_of(l)->model));
    return NNT_OK;
}

static void gpt_destroy(nnt_layer *l)
{
    gpt_impl *g = impl_of(l);
    nnt_tensor_destroy(g->targets);
    nnt_gpt2_destroy(g->model);
    g->targets = NULL;
    g->model = NULL;
}

static const nnt_layer_vt GPT_VT = {
    NNT_LAYER_GPT, "gpt", gpt_forward, gpt_backward, gpt_set_targets, gpt_loss,
    gpt_has_targets, gpt_num_blocks, gpt_destroy, gpt_clear_grad,
};

/* ---- parameters ---------------------------------------------------------------------------- */

/* The model's parameter pieces in registration order: llm.c name, piece, GPT-2 name (after
 * "h.<l>." for per-layer ones), decay, init rule. */
static const struct piece {
    const char *llmc;
    int piece, per_layer;
    const char *name;
    int decay;
    nnt_init_rule init;
} PIECES[] = {
    {"wte", 0, 0, "wte.weight", 1, NNT_INIT_NORMAL},
    {"wpe", 0, 0, "wpe.weight", 1, NNT_INIT_NORMAL},
    {"ln1w", 0, 1, "ln_1.weight", 0, NNT_INIT_ONE},
    {"ln1b", 0, 1, "ln_1.bias", 0, NNT_INIT_ZERO},
    {"qkvw", 0, 1, "attn.q.weight", 1, NNT_INIT_NORMAL},
    {"qkvw", 1, 1, "attn.k.weight", 1, NNT_INIT_NORMAL},
    {"qkvw", 2, 1, "attn.v.weight", 1, NNT_INIT_NORMAL},
    {"qkvb", 0, 1, "attn.q.bias", 0, NNT_INIT_ZERO},
    {"qkvb", 1, 1, "attn.k.bias", 0, NNT_INIT_ZERO},
    {"qkvb", 2, 1, "attn.v.bias", 0, NNT_INIT_ZERO},
    {"attprojw", 0, 1, "attn.c_proj.weight", 1, NNT_INIT_NORMAL_PROJ},
    {"attprojb", 0, 1, "attn.c_proj.bias", 0, NNT_INIT_ZERO},
    {"ln2w", 0, 1, "ln_2.weight", 0, NNT_INIT_ONE},
    {"ln2b", 0, 1, "ln_2.bias", 0, NNT_INIT_ZERO},
    {"fcw", 0, 1, "mlp.c_fc.weight", 1, NNT_INIT_NORMAL},
    {"fcb", 0, 1, "mlp.c_fc.bias", 0, NNT_INIT_ZERO},
    {"fcprojw", 0, 1, "mlp.c_proj.weight", 1, NNT_INIT_NORMAL_PROJ},
    {"fcprojb", 0, 1, "mlp.c_proj.bias", 0, NNT_INIT_ZERO},
    {"lnfw", 0, 0, "ln_f.weight", 0, NNT_INIT_ONE},
    {"lnfb", 0, 0, "ln_f.bias", 0, NNT_INIT_ZERO},
};
#define NPIECES ((int)(sizeof PIECES / sizeof PIECES[0]))

static int add_piece(nnt_layer *l, const struct piece *p, int64_t layer)
{
    char name[96];
    if (p->per_layer)
        snprintf(name, sizeof name, "h.%lld.%s", (long long)layer, p->name);
    else
        snprintf(name, sizeof name, "%s", p->name);
    nnt_tensor *value = NULL, *grad = NULL;
    NNT_TRY(nnt_gpt2_param_tensors(impl_of(l)->model, p->llmc, layer, p->piece, &value, &grad));
    return nnt_layer_add_param(l, name, value, grad, p->decay, p->init, 0);
}

/* Register every tensor of the model: wte, wpe, the blocks in order, ln_f. */
static int register_params(nnt_layer *l, int64_t layers)
{
    for (int i = 0; i < 2; i++)
        NNT_TRY(add_piece(l, &PIECES[i], 0));
    for (int64_t b = 0; b < layers; b++)
        for (int i = 0; i < NPIECES; i++)
            if (PIECES[i].per_layer)
                NNT_TRY(add_piece(l, &PIECES[i], b));
    for (int i = NPIECES - 2; i < NPIECES; i++)
        NNT_TRY(add_piece(l, &PIECES[i], 0));
    return NNT_OK;
}

/* Wrap a created model (taken over: destroyed on failure too). */
static int wrap_model(nnt_ctx *ctx, nnt_gpt2 *model, int64_t B, int64_t T,
                      const nnt_gpt2_tiling *tile, const char *fn, nnt_layer **out)
{
    nnt_layer *l = NULL;
    int rc = nnt_layer_new(ctx, &GPT_VT, sizeof(gpt_impl), fn, &l);
    if (rc) {
        nnt_gpt2_destroy(model);
        return rc;
    }
    gpt_impl *g = impl_of(l);
    g->model = model;
    g->B = B;
    g->T = T;
    g->tile = *tile;
    nnt_gpt2_config c;
    nnt_gpt2_get_config(model, &c);
    if ((rc = register_params(l, c.layers))) {
        nnt_layer_destroy(l);
        return rc;
    }
    *out = l;
    return NNT_OK;
}

/* The resolved internal tiling for cfg at (B, T). */
static int model_tiling(nnt_ctx *ctx, const char *fn, const nnt_gpt_config *cfg, int64_t B,
                        int64_t T, const nnt_tiling *tiling, nnt_gpt2_tiling *out)
{
    nnt_tiling r;
    int rc = nnt_gpt_tiling(ctx, cfg, B, T, tiling, &r);
    if (rc)
        return nnt_fail(ctx, rc, "%s: %s", fn, nnt_ctx_last_error(ctx));
    *out = internal_tiling(&r);
    return NNT_OK;
}

/* ---- creation and checkpoints ------------------------------------------------------------- */

NNT_API int nnt_gpt_create(nnt_ctx *ctx, const nnt_gpt_config *cfg, int64_t B, int64_t T,
                           const nnt_tiling *tiling, nnt_layer **out)
{
    const char *fn = "nnt_gpt_create";
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    NNT_TRY(check_config(ctx, fn, cfg, B, T));
    nnt_gpt2_tiling t;
    NNT_TRY(model_tiling(ctx, fn, cfg, B, T, tiling, &t));
    nnt_gpt2_config ic = internal_config(cfg);
    nnt_gpt2 *model = NULL;
    TRY_AS(ctx, fn, nnt_gpt2_create(ctx, &ic, &t, B, T, &model));
    nnt_layer *l = NULL;
    NNT_TRY(wrap_model(ctx, model, B, T, &t, fn, &l));
    return nnt_layer_finish(l, 0, out);
}

static int check_gpt(const nnt_layer *gpt, const char *fn)
{
    NNT_TRY(nnt_layer_check(gpt, fn));
    if (gpt->vt != &GPT_VT)
        return nnt_fail(gpt->ctx, NNT_E_INVAL, "%s: a %s layer is not a gpt layer", fn,
                        gpt->vt->kind_name);
    return NNT_OK;
}

static nnt_gpt_config public_config(const nnt_gpt2_config *c)
{
    nnt_gpt_config r = {sizeof(nnt_gpt_config), c->vocab, c->max_seq, c->layers, c->heads,
                        c->channels};
    return r;
}

NNT_API int nnt_gpt_config_of(const nnt_layer *gpt, nnt_gpt_config *cfg)
{
    const char *fn = "nnt_gpt_config_of";
    NNT_TRY(check_gpt(gpt, fn));
    if (!cfg)
        return nnt_fail(gpt->ctx, NNT_E_INVAL, "%s: cfg is NULL", fn);
    nnt_gpt2_config c;
    nnt_gpt2_get_config(impl_of(gpt)->model, &c);
    *cfg = public_config(&c);
    return NNT_OK;
}

NNT_API int nnt_gpt_set_recompute(nnt_layer *gpt, int enable)
{
    NNT_TRY(check_gpt(gpt, "nnt_gpt_set_recompute"));
    return nnt_gpt2_set_recompute(impl_of(gpt)->model, enable);
}

NNT_API int nnt_gpt_load_llmc(nnt_ctx *ctx, const char *path, int64_t B, int64_t T,
                              const nnt_tiling *tiling, nnt_layer **out)
{
    const char *fn = "nnt_gpt_load_llmc";
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    NNT_TRY(nnt_ctx_check(ctx, fn));
    if (!path)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    nnt_gpt2_config ic;
    TRY_AS(ctx, fn, nnt_gpt2_llmc_config(ctx, path, &ic));
    nnt_gpt_config cfg = public_config(&ic);
    NNT_TRY(check_config(ctx, fn, &cfg, B, T));
    nnt_gpt2_tiling t;
    NNT_TRY(model_tiling(ctx, fn, &cfg, B, T, tiling, &t));
    nnt_gpt2 *model = NULL;
    TRY_AS(ctx, fn, nnt_gpt2_load_llmc(ctx, path, &t, B, T, &model));
    return wrap_model(ctx, model, B, T, &t, fn, out);
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
    nnt_gpt2_tiling t;
    NNT_TRY(model_tiling(ctx, fn, cfg, B, T, tiling, &t));
    nnt_gpt2_config ic = internal_config(cfg);
    nnt_gpt2 *model = NULL;
    TRY_AS(ctx, fn, nnt_gpt2_load_safetensors(ctx, path, &ic, &t, B, T, &model));
    return wrap_model(ctx, model, B, T, &t, fn, out);
}

NNT_API int nnt_gpt_save_llmc(nnt_layer *gpt, const char *path)
{
    const char *fn = "nnt_gpt_save_llmc";
    NNT_TRY(check_gpt(gpt, fn));
    if (!path)
        return nnt_fail(gpt->ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    TRY_AS(gpt->ctx, fn, nnt_gpt2_save_llmc(impl_of(gpt)->model, path));
    return NNT_OK;
}

NNT_API int nnt_gpt_save_safetensors(nnt_layer *gpt, const char *path)
{
    const char *fn = "nnt_gpt_save_safetensors";
    NNT_TRY(check_gpt(gpt, fn));
    if (!path)
        return nnt_fail(gpt->ctx, NNT_E_INVAL, "%s: path is NULL", fn);
    TRY_AS(gpt->ctx, fn, nnt_gpt2_save_safetensors(impl_of(gpt)->model, path));
    return NNT_OK;
}

/* ---- generation ------------------------------------------------------------------------------ */

NNT_API int nnt_gpt_generate(nnt_layer *gpt, const int32_t *prompt, int64_t nprompt,
                             int64_t ngen, const nnt_sampling *s, int32_t *out)
{
    const char *fn = "nnt_gpt_generate";
    NNT_TRY(check_gpt(gpt, fn));
    if (s && s->size < sizeof(nnt_sampling))
        return nnt_fail(gpt->ctx, NNT_E_INVAL, "%s: s->size %zu < sizeof(nnt_sampling) %zu "
                        "(initialise it with NNT_SAMPLING_INIT)", fn, s->size,
                        sizeof(nnt_sampling));
    nnt_gpt2_sampling is = {0.0, 0, 0};
    if (s) {
        is.temperature = s->temperature;
        is.top_k = s->top_k;
        is.seed = s->seed;
    }
    gpt_impl *g = impl_of(gpt);
    /* the activations are overwritten: no backward of an earlier forward */
    gpt->forward_pending = 0;
    g->last_had_targets = 0;
    TRY_AS(gpt->ctx, fn,
           nnt_gpt2_generate(g->model, prompt, nprompt, ngen, s ? &is : NULL, out));
    return NNT_OK;
}
