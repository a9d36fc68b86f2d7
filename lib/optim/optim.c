/* SPDX-License-Identifier: MIT */
/* nnt_optim: AdamW, Adam (L2) and SGD with momentum over a set of named parameters, with
 * gradient accumulation, global-norm clipping and warmup + constant / cosine / linear /
 * warmup-stable-decay schedules.
 *
 * One update (nnt_optim_step):
 *   step += 1;  lr = schedule(step)
 *   scale = 1 / accum_steps                          (gradients hold sums of micro-batches)
 *   grad_norm = sqrt(sum of g^2 over every gradient) * scale     (always; reported in stats)
 *   grad_clip > 0:  c = grad_clip / (grad_norm + 1e-6);  c < 1: scale *= c
 *                                                     (torch.nn.utils.clip_grad_norm_)
 *   every parameter: nnt_tensor_adam_step / nnt_tensor_sgd_step with grad_scale = scale and
 *   weight_decay = its decay flag ? weight_decay : 0.
 * The norm needs nnt_tensors_sumsq, which waits for the gradients: one synchronisation per
 * update, also when clipping is off (it gives stats.grad_norm for progress output).
 */
#include "optim.h"

#include "../io/io.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLIP_EPS 1e-6   /* added to the norm before dividing, as PyTorch */
#define PI 3.14159265358979323846

/* ---- options ------------------------------------------------------------------------- */

/* Copy the user's options (NULL: defaults), checking the size field. */
static int read_options(const char *fn, const nnt_optim_options *user, nnt_optim_options *o)
{
    static const nnt_optim_options defaults = NNT_OPTIM_OPTIONS_INIT;
    return nnt_read_options(fn, user, &defaults, o, sizeof *o,
                            offsetof(nnt_optim_options, decay_steps),   /* 0.3's size */
                            "initialise them with NNT_OPTIM_OPTIONS_INIT");
}

static int check_real_options(const char *fn, const nnt_optim_options *o)
{
    int rc = nnt_check_adam_hparams(fn, o->lr, o->beta1, o->beta2, o->eps);
    if (rc == 0)
        rc = nnt_check_range(fn, "momentum", o->momentum, 0, 0, INFINITY, 0);
    if (rc == 0)
        rc = nnt_check_range(fn, "weight_decay", o->weight_decay, 0, 0, INFINITY, 0);
    if (rc == 0)
        rc = nnt_check_range(fn, "grad_clip", o->grad_clip, 0, 0, INFINITY, 0);
    if (rc == 0)
        rc = nnt_check_range(fn, "min_lr", o->min_lr, 0, 0, INFINITY, 0);
    return rc;
}

static int check_decay(const char *fn, const nnt_optim_options *o)
{
    if (o->decay_shape != NNT_DECAY_LINEAR && o->decay_shape != NNT_DECAY_COSINE &&
        o->decay_shape != NNT_DECAY_SQRT)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: decay_shape = %d is not an nnt_decay_shape", fn,
                        (int)o->decay_shape);
    if (o->schedule != NNT_SCHEDULE_WSD)
        return NNT_OK;
    if (o->decay_steps < 1 || o->decay_steps > o->total_steps - o->warmup_steps)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: the WSD schedule needs 1 <= decay_steps (%lld) "
                        "<= total_steps - warmup_steps (%lld - %lld)", fn,
                        (long long)o->decay_steps, (long long)o->total_steps,
                        (long long)o->warmup_steps);
    return NNT_OK;
}

static int check_schedule(const char *fn, const nnt_optim_options *o)
{
    if (o->schedule != NNT_SCHEDULE_CONSTANT && o->schedule != NNT_SCHEDULE_COSINE &&
        o->schedule != NNT_SCHEDULE_LINEAR && o->schedule != NNT_SCHEDULE_WSD)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: schedule = %d is not an nnt_schedule", fn,
                        (int)o->schedule);
    if (o->warmup_steps < 0 || o->total_steps < 0 || o->decay_steps < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: warmup_steps = %lld, total_steps = %lld and "
                        "decay_steps = %lld must be >= 0", fn, (long long)o->warmup_steps,
                        (long long)o->total_steps, (long long)o->decay_steps);
    if (o->schedule == NNT_SCHEDULE_CONSTANT)
        return check_decay(fn, o);
    const char *name = nnt_schedule_name(o->schedule);
    if (o->total_steps <= o->warmup_steps)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: the %s schedule needs total_steps (%lld) > "
                        "warmup_steps (%lld)", fn, name, (long long)o->total_steps,
                        (long long)o->warmup_steps);
    if (o->min_lr > o->lr)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: the %s schedule needs min_lr (%g) <= lr (%g)",
                        fn, name, o->min_lr, o->lr);
    return check_decay(fn, o);
}

static int check_options(const char *fn, const nnt_optim_options *o)
{
    if (o->kind != NNT_OPTIM_ADAMW && o->kind != NNT_OPTIM_ADAM && o->kind != NNT_OPTIM_SGD)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: kind = %d is not an nnt_optim_kind", fn,
                        (int)o->kind);
    if (o->accum_steps < 1)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: accum_steps = %lld must be >= 1", fn,
                        (long long)o->accum_steps);
    int rc = check_real_options(fn, o);
    return rc ? rc : check_schedule(fn, o);
}

/* ---- shared with state.c ------------------------------------------------------------- */

int nnt_optim_check(const nnt_optim *opt, const char *fn)
{
    if (!opt)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: optimizer is NULL", fn);
    if (opt->magic != NNT_OPTIM_MAGIC)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: not a live optimizer (destroyed?)", fn);
    return nnt_ctx_check(opt->ctx, fn);
}

int nnt_optim_nstate(const nnt_optim_options *opts)
{
    if (opts->kind == NNT_OPTIM_SGD)
        return opts->momentum != 0.0 ? 1 : 0;
    return 2;
}

const char *nnt_optim_state_prefix(const nnt_optim_options *opts, int i)
{
    if (opts->kind == NNT_OPTIM_SGD)
        return "sgd_momentum";
    return i == 0 ? "adam_m" : "adam_v";
}

const char *nnt_optim_kind_name(nnt_optim_kind kind)
{
    switch (kind) {
    case NNT_OPTIM_ADAMW:
        return "adamw";
    case NNT_OPTIM_ADAM:
        return "adam";
    case NNT_OPTIM_SGD:
        return "sgd";
    }
    return "?";
}

const char *nnt_schedule_name(nnt_schedule s)
{
    switch (s) {
    case NNT_SCHEDULE_CONSTANT:
        return "constant";
    case NNT_SCHEDULE_COSINE:
        return "cosine";
    case NNT_SCHEDULE_LINEAR:
        return "linear";
    case NNT_SCHEDULE_WSD:
        return "wsd";
    }
    return "?";
}

const char *nnt_decay_shape_name(nnt_decay_shape d)
{
    switch (d) {
    case NNT_DECAY_LINEAR:
        return "linear";
    case NNT_DECAY_COSINE:
        return "cosine";
    case NNT_DECAY_SQRT:
        return "1-sqrt";
    }
    return "?";
}

/* The share f(p) of lr - min_lr left after done of a decay's span steps, p = done / span in
 * (0, 1); the linear one as (span - done) / span, exact where 1 - p would cancel. */
static double decay_factor(nnt_decay_shape shape, int64_t done, int64_t span)
{
    double p = (double)done / (double)span;
    switch (shape) {
    case NNT_DECAY_COSINE:
        return 0.5 * (1.0 + cos(PI * p));
    case NNT_DECAY_SQRT:
        return 1.0 - sqrt(p);
    case NNT_DECAY_LINEAR:
        break;
    }
    return (double)(span - done) / (double)span;
}

/* Linear warmup to lr over warmup_steps (lr * s / warmup for s <= warmup), then lr
 * (constant), or a decay from lr down to min_lr reached at total_steps: over every step
 * after the warmup (cosine, linear) or over the last decay_steps (WSD, lr until then). */
double nnt_optim_schedule(const nnt_optim_options *o, int64_t step)
{
    if (step <= o->warmup_steps)
        return o->lr * (double)step / (double)o->warmup_steps;
    if (o->schedule == NNT_SCHEDULE_CONSTANT)
        return o->lr;
    if (step >= o->total_steps)
        return o->min_lr;
    int64_t start = o->warmup_steps;   /* the decay's step 0 */
    nnt_decay_shape shape = o->schedule == NNT_SCHEDULE_COSINE ? NNT_DECAY_COSINE
                                                               : NNT_DECAY_LINEAR;
    if (o->schedule == NNT_SCHEDULE_WSD) {
        start = o->total_steps - o->decay_steps, shape = o->decay_shape;
        if (step <= start)
            return o->lr;   /* stable */
    }
    return o->min_lr +
           (o->lr - o->min_lr) * decay_factor(shape, step - start, o->total_steps - start);
}

/* ---- create, destroy ----------------------------------------------------------------- */

int nnt_optim_create(nnt_ctx *ctx, const nnt_optim_options *opts, nnt_optim **out)
{
    const char *fn = "nnt_optim_create";
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: out is NULL", fn);
    *out = NULL;
    nnt_optim_options o;
    int rc = nnt_ctx_check(ctx, fn);
    if (rc == 0)
        rc = read_options(fn, opts, &o);
    if (rc == 0)
        rc = check_options(fn, &o);
    if (rc)
        return rc;
    nnt_optim *opt = calloc(1, sizeof *opt);
    if (!opt)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    opt->magic = NNT_OPTIM_MAGIC;
    opt->ctx = ctx;
    opt->opts = o;
    *out = opt;
    return NNT_OK;
}

static void release_param(nnt_optim_param *p)
{
    free(p->name);
    nnt_tensor_destroy(p->state[0]);
    nnt_tensor_destroy(p->state[1]);
    memset(p, 0, sizeof *p);
}

void nnt_optim_destroy(nnt_optim *opt)
{
    if (!opt || opt->magic != NNT_OPTIM_MAGIC)
        return;
    nnt_optim_inbwd_release(opt);
    for (int i = 0; i < opt->nparams; i++)
        release_param(&opt->params[i]);
    free(opt->params);
    free(opt->layers);
    opt->magic = 0;
    free(opt);
}

/* ---- parameters ---------------------------------------------------------------------- */

static nnt_optim_param *find_param(const nnt_optim *opt, const char *name)
{
    for (int i = 0; i < opt->nparams; i++)
        if (strcmp(opt->params[i].name, name) == 0)
            return &opt->params[i];
    return NULL;
}

/* A non-empty UTF-8 name of at most NNT_OPTIM_MAXNAME bytes, not used yet. */
static int check_name(const nnt_optim *opt, const char *fn, const char *name)
{
    if (!name)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: name is NULL", fn);
    size_t len = strlen(name);
    if (len == 0 || len > NNT_OPTIM_MAXNAME)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: name length %zu is not in 1..%d bytes", fn,
                        len, NNT_OPTIM_MAXNAME);
    if (!nnt_utf8_valid(name, len, NULL))
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: name '%s' is not valid UTF-8", fn, name);
    if (find_param(opt, name))
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: a parameter named '%s' was added already",
                        fn, name);
    return NNT_OK;
}

/* NNT_E_INVAL if t is the value or the gradient of a parameter added already. */
static int check_unused(const nnt_optim *opt, const char *fn, const char *role,
                        const nnt_tensor *t)
{
    for (int i = 0; i < opt->nparams; i++) {
        const nnt_optim_param *p = &opt->params[i];
        if (p->value == t || p->grad == t)
            return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: %s is already the %s of parameter '%s'",
                            fn, role, p->value == t ? "value" : "gradient", p->name);
    }
    return NNT_OK;
}

static int check_tensors(const nnt_optim *opt, const char *fn, const nnt_tensor *value,
                         const nnt_tensor *grad)
{
    int rc = nnt_check_arg(fn, "value", value, NNT_FP32, 0);
    if (rc == 0)
        rc = nnt_check_arg(fn, "grad", grad, NNT_FP32, 0);
    if (rc == 0 && value == grad)
        rc = nnt_fail(opt->ctx, NNT_E_INVAL, "%s: value and grad are the same tensor", fn);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "value", value, "grad", grad);
    if (rc == 0)
        rc = check_unused(opt, fn, "value", value);
    if (rc == 0)
        rc = check_unused(opt, fn, "grad", grad);
    return rc;
}

/* State tensors of value's shape and tiling (not written yet). */
static int create_state(nnt_optim *opt, nnt_tensor *value, nnt_optim_param *p)
{
    int ndim = 0;
    int64_t shape[NNT_MAX_DIMS], tile[NNT_MAX_DIMS];
    int rc = nnt_tensor_ndim(value, &ndim);
    if (rc == 0)
        rc = nnt_tensor_shape(value, shape);
    if (rc == 0)
        rc = nnt_tensor_tile_shape(value, tile);
    for (int i = 0; rc == 0 && i < nnt_optim_nstate(&opt->opts); i++) {
        rc = nnt_tensor_create_beside(opt->ctx, NNT_FP32, ndim, shape, tile, value,
                                      NNT_HELD_STAYS, &p->state[i]);
        if (rc == 0)
            nnt_tensor_set_kind(p->state[i], NNT_MEM_OPTIM_STATE);
    }
    return rc;
}

static int grow_params(nnt_optim *opt, const char *fn)
{
    if (opt->nparams < opt->cap)
        return NNT_OK;
    int cap = opt->cap ? 2 * opt->cap : 16;
    nnt_optim_param *grown = realloc(opt->params, (size_t)cap * sizeof *grown);
    if (!grown)
        return nnt_fail(opt->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    opt->params = grown;
    opt->cap = cap;
    return NNT_OK;
}

static int add_param(nnt_optim *opt, const char *fn, const char *name, nnt_tensor *value,
                     nnt_tensor *grad, int decay)
{
    if (opt->step > 0)
        return nnt_fail(opt->ctx, NNT_E_STATE, "%s: parameters cannot be added after the first "
                        "update or a load (step %lld)", fn, (long long)opt->step);
    int rc = check_name(opt, fn, name);
    if (rc == 0)
        rc = check_tensors(opt, fn, value, grad);
    if (rc == 0)
        rc = grow_params(opt, fn);
    if (rc)
        return rc;
    nnt_optim_param *p = &opt->params[opt->nparams];
    memset(p, 0, sizeof *p);
    size_t len = strlen(name) + 1;
    p->name = malloc(len);
    if (!p->name)
        return nnt_fail(opt->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    memcpy(p->name, name, len);
    p->value = value;
    p->grad = grad;
    p->decay = decay != 0;
    rc = create_state(opt, value, p);
    if (rc) {
        release_param(p);
        return rc;
    }
    opt->nparams++;
    return NNT_OK;
}

int nnt_optim_add_param(nnt_optim *opt, const char *name, nnt_tensor *value, nnt_tensor *grad,
                        int decay)
{
    const char *fn = "nnt_optim_add_param";
    int rc = nnt_optim_check(opt, fn);
    if (rc == 0 && (rc = add_param(opt, fn, name, value, grad, decay)) == 0)
        opt->has_model = 0;   /* the parameters are no longer one model's alone */
    return rc;
}

/* Whether the parameters are exactly one model's (alone: the layer's are the only ones). */
static void note_model(nnt_optim *opt, nnt_layer *layer, int alone)
{
    nnt_layer_kind kind;
    opt->has_model = 0;
    if (!alone || nnt_layer_kind_of(layer, &kind) ||
        (kind != NNT_LAYER_GPT && kind != NNT_LAYER_MODEL))
        return;
    opt->model.size = sizeof opt->model;
    opt->has_model = nnt_model_config_of(layer, &opt->model) == 0;
}

/* Every parameter of the tree, or none: a failure removes those this call added. */
int nnt_optim_add_layer(nnt_optim *opt, nnt_layer *layer)
{
    const char *fn = "nnt_optim_add_layer";
    int rc = nnt_optim_check(opt, fn);
    if (rc)
        return rc;
    if (!layer)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: layer is NULL", fn);
    int64_t count = 0;
    int first = opt->nparams, frozen = 0;
    rc = nnt_layer_num_params(layer, &count, NULL);
    for (int64_t i = 0; rc == 0 && i < count; i++) {
        nnt_param_info info;
        memset(&info, 0, sizeof info);
        info.size = sizeof info;
        rc = nnt_layer_param(layer, i, &info);
        if (rc == 0 && info.frozen)   /* no gradient, no state */
            frozen++;
        else if (rc == 0)
            rc = add_param(opt, fn, info.name, info.value, info.grad, info.decay);
    }
    nnt_layer **layers = NULL;
    if (rc == 0 && !(layers = realloc(opt->layers, (size_t)(opt->nlayers + 1) * sizeof *layers)))
        rc = nnt_fail(opt->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    if (rc == 0) {
        opt->layers = layers;
        opt->layers[opt->nlayers++] = layer;
    }
    while (rc && opt->nparams > first)
        release_param(&opt->params[--opt->nparams]);
    if (rc == 0)   /* a training state records a model whose parameters it holds, all */
        note_model(opt, layer, first == 0 && frozen == 0);
    return rc;
}

int nnt_optim_set_decay(nnt_optim *opt, const char *name, int decay)
{
    const char *fn = "nnt_optim_set_decay";
    int rc = nnt_optim_check(opt, fn);
    if (rc)
        return rc;
    if (!name)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: name is NULL", fn);
    nnt_optim_param *p = find_param(opt, name);
    if (!p)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: no parameter named '%s'", fn, name);
    p->decay = decay != 0;
    return NNT_OK;
}

/* ---- one update ---------------------------------------------------------------------- */

/* Repeat the failure just recorded (by a check given fn) with the parameter's name (nnt_fail
 * may format the message it is given from nnt_ctx_last_error). */
int nnt_optim_fail_param(const nnt_optim *opt, const char *fn, const nnt_optim_param *p, int rc)
{
    const char *msg = nnt_ctx_last_error(NULL);
    size_t skip = strlen(fn);
    if (strncmp(msg, fn, skip) == 0 && strncmp(msg + skip, ": ", 2) == 0)
        msg += skip + 2;   /* "fn: " once is enough */
    return nnt_fail(opt->ctx, rc, "%s: parameter '%s': %s", fn, p->name, msg);
}

/* Every value and gradient can be read (checked before anything is submitted). */
static int check_readable(const nnt_optim *opt, const char *fn)
{
    for (int i = 0; i < opt->nparams; i++) {
        const nnt_optim_param *p = &opt->params[i];
        int rc = nnt_tensor_check_readable(p->value, fn);
        if (rc == 0)
            rc = nnt_tensor_check_readable(p->grad, fn);
        if (rc)
            return nnt_optim_fail_param(opt, fn, p, rc);
    }
    return NNT_OK;
}

/* sqrt(sum of squares of every gradient); waits for them. */
static int gradient_norm(const nnt_optim *opt, const char *fn, double *norm)
{
    size_t count = opt->nparams > 0 ? (size_t)opt->nparams : 1;
    nnt_tensor **grads = malloc(count * sizeof *grads);
    if (!grads)
        return nnt_fail(opt->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    for (int i = 0; i < opt->nparams; i++)
        grads[i] = opt->params[i].grad;
    double sumsq = 0;
    int rc = nnt_tensors_sumsq(opt->nparams, grads, &sumsq);
    free(grads);
    *norm = sqrt(sumsq);
    return rc;
}

/* Adam moments start at zero: fill those never written. */
int nnt_optim_zero_moments(const nnt_optim *opt, nnt_optim_param *p)
{
    if (opt->opts.kind == NNT_OPTIM_SGD)
        return NNT_OK;   /* the SGD kernel writes the buffer without reading it at step 1 */
    for (int k = 0; k < 2 && !p->state_written; k++)
        NNT_TRY(nnt_tensor_fill(p->state[k], 0.0));
    return NNT_OK;
}

int nnt_optim_update_param(const nnt_optim *opt, const nnt_optim_param *p, int64_t step,
                           double lr, double grad_scale)
{
    const nnt_optim_options *o = &opt->opts;
    double decay = p->decay ? o->weight_decay : 0.0;
    if (o->kind == NNT_OPTIM_SGD)
        return nnt_tensor_sgd_step(lr, o->momentum, decay, grad_scale, step, p->value, p->grad,
                                   p->state[0]);
    nnt_adam_options a = NNT_ADAM_OPTIONS_INIT;
    a.lr = lr;
    a.beta1 = o->beta1;
    a.beta2 = o->beta2;
    a.eps = o->eps;
    a.weight_decay = decay;
    a.decoupled = o->kind == NNT_OPTIM_ADAMW;
    a.grad_scale = grad_scale;
    int rc = nnt_tensor_adam_step(&a, step, p->value, p->grad, p->state[0], p->state[1]);
    /* the moments are next needed at the next update: first to evict under a RAM budget */
    nnt_tensor_wont_use(p->state[0]);
    nnt_tensor_wont_use(p->state[1]);
    return rc;
}

/* Factor that clip_grad_norm_ applies for this norm: min(1, clip / (norm + 1e-6)). */
static double clip_factor(double grad_clip, double norm)
{
    if (grad_clip <= 0.0)
        return 1.0;
    double c = grad_clip / (norm + CLIP_EPS);
    return c < 1.0 ? c : 1.0;
}

int nnt_optim_step(nnt_optim *opt)
{
    const char *fn = "nnt_optim_step";
    int rc = nnt_optim_check(opt, fn);
    if (rc)
        return rc;
    if (opt->nparams == 0)
        return nnt_fail(opt->ctx, NNT_E_STATE, "%s: the optimizer has no parameters", fn);
    if (opt->inbwd)   /* armed: some parameters were updated during the backward */
        return nnt_optim_inbwd_step(opt);
    double norm = 0;
    rc = check_readable(opt, fn);
    if (rc == 0)
        rc = gradient_norm(opt, fn, &norm);
    if (rc)
        return rc;
    int64_t step = opt->step + 1;
    double lr = nnt_optim_schedule(&opt->opts, step);
    double grad_scale = 1.0 / (double)opt->opts.accum_steps;
    norm *= grad_scale;
    grad_scale *= clip_factor(opt->opts.grad_clip, norm);
    for (int i = 0; rc == 0 && i < opt->nparams; i++)
        rc = nnt_optim_zero_moments(opt, &opt->params[i]);
    for (int i = 0; rc == 0 && i < opt->nparams; i++)
        rc = nnt_optim_update_param(opt, &opt->params[i], step, lr, grad_scale);
    if (rc)
        return rc;
    for (int i = 0; i < opt->nparams; i++)
        opt->params[i].state_written = 1;
    opt->step = step;
    opt->last_lr = lr;
    opt->last_grad_norm = norm;
    return NNT_OK;
}

/* ---- queries ------------------------------------------------------------------------- */

int nnt_optim_stats_get(const nnt_optim *opt, nnt_optim_stats *stats)
{
    const char *fn = "nnt_optim_stats_get";
    int rc = nnt_optim_check(opt, fn);
    if (rc)
        return rc;
    if (!stats)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: stats is NULL", fn);
    if (stats->size < sizeof *stats)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: stats->size %zu < sizeof(nnt_optim_stats) "
                        "%zu (set it before the call)", fn, stats->size, sizeof *stats);
    stats->step = opt->step;
    stats->lr = opt->last_lr;
    stats->grad_norm = opt->last_grad_norm;
    return NNT_OK;
}

int nnt_optim_lr_at(const nnt_optim *opt, int64_t step, double *lr)
{
    const char *fn = "nnt_optim_lr_at";
    int rc = nnt_optim_check(opt, fn);
    if (rc)
        return rc;
    if (!lr)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: lr is NULL", fn);
    if (step < 1)
        return nnt_fail(opt->ctx, NNT_E_INVAL, "%s: step = %lld must be >= 1", fn,
                        (long long)step);
    *lr = nnt_optim_schedule(&opt->opts, step);
    return NNT_OK;
}
