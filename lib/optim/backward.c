// SPDX-License-Identifier: MIT
/* Updates during the backward (nnt_optim_update_in_backward): each parameter is updated as
 * soon as the backward has submitted the last task that writes its gradient, and its
 * gradient is dropped at once. Under a memory budget a block's weights and moments are then
 * read and written once a step while they are in memory, and a gradient reaches the disk only
 * when its writers are far apart in the backward (a tied table: the head first, the
 * embedding last).
 *
 * The update is the one nnt_optim_step makes -- the same lr, the same gradient scale
 * (1 / accum_steps; no clipping, which needs every gradient first), the same kernels -- so
 * parameters and moments are bit for bit those of the separate step. The gradient norm
 * (stats) is summed from per-tile partials submitted before each update, added at
 * nnt_optim_step in parameter order as nnt_tensors_sumsq adds them: the same value too.
 *
 * When is a gradient complete? Arming walks the layer trees added to the optimizer and
 * counts, per parameter, the layers whose own backward writes its gradient (its owner, and
 * a tied head that reads its table: nnt_layer_each_grad). nnt_layer_backward calls the hook
 * after each layer's backward was submitted; a parameter whose last writer has run is
 * updated. Parameters no layer writes (added by nnt_optim_add_param) wait for
 * nnt_optim_step, which updates every parameter not updated yet. */
#include "optim.h"

#include "../layers/layer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct nnt_optim_inbwd {
    int64_t step;                 /* the update number being made                         */
    double lr, grad_scale;
    int *writers_left;            /* (nparams) layers still to write the gradient          */
    char *updated;                /* (nparams) updated during the backward                 */
    int64_t *first;               /* (nparams + 1) first partial of each parameter         */
    starpu_data_handle_t *partial;   /* (ntiles of every gradient) the norm's partials    */
    int *owner;                   /* (ntiles) rank of each partial's tile                  */
    char *submitted;              /* (nparams) its partials are registered                 */
} nnt_optim_inbwd;

static int find_value(const nnt_optim *opt, const nnt_tensor *value)
{
    for (int i = 0; i < opt->nparams; i++)
        if (opt->params[i].value == value)
            return i;
    return -1;
}

/* Drop the partials registered so far and the arrays; disarm. */
void nnt_optim_inbwd_release(nnt_optim *opt)
{
    nnt_optim_inbwd *b = opt->inbwd;
    if (!b)
        return;
    if (opt->ctx->backward_hook_user == opt) {
        opt->ctx->backward_hook = NULL;
        opt->ctx->backward_hook_user = NULL;
    }
    for (int i = 0; b->first && b->submitted && i < opt->nparams; i++)
        for (int64_t k = b->first[i]; b->submitted[i] && k < b->first[i + 1]; k++)
            starpu_data_unregister(b->partial[k]);
    free(b->writers_left);
    free(b->updated);
    free(b->first);
    free(b->partial);
    free(b->owner);
    free(b->submitted);
    free(b);
    opt->inbwd = NULL;
}

/* The norm's partials of parameter i's gradient, into its slots. */
static int submit_partials(nnt_optim *opt, int i)
{
    nnt_optim_inbwd *b = opt->inbwd;
    int64_t count = b->first[i];
    int rc = nnt_sumsq_submit(opt->params[i].grad, b->partial, b->owner, &count);
    b->submitted[i] = 1;   /* registered: released even after a failure */
    return rc;
}

/* Parameter i's gradient is complete: its norm partials, its update, its gradient dropped. */
static int update_now(nnt_optim *opt, int i)
{
    const char *fn = "nnt_layer_backward (updating parameters: nnt_optim_update_in_backward)";
    nnt_optim_inbwd *b = opt->inbwd;
    nnt_optim_param *p = &opt->params[i];
    int rc = nnt_tensor_check_readable(p->grad, fn);
    if (rc == 0)
        rc = submit_partials(opt, i);
    if (rc == 0)
        rc = nnt_optim_zero_moments(opt, p);
    if (rc == 0)
        rc = nnt_optim_update_param(opt, p, b->step, b->lr, b->grad_scale);
    if (rc)
        return nnt_optim_fail_param(opt, fn, p, rc);
    p->state_written = 1;
    b->updated[i] = 1;
    nnt_tensor_invalidate(p->grad);   /* after its readers in task order: never written back */
    return NNT_OK;
}

static int count_writer(void *user, nnt_layer *l, nnt_tensor *value, int own)
{
    (void)l, (void)own;
    nnt_optim *opt = user;
    int i = find_value(opt, value);
    if (i >= 0)
        opt->inbwd->writers_left[i]++;
    return NNT_OK;
}

static int writer_done(void *user, nnt_layer *l, nnt_tensor *value, int own)
{
    (void)l, (void)own;
    nnt_optim *opt = user;
    int i = find_value(opt, value);
    if (i < 0 || opt->inbwd->updated[i] || --opt->inbwd->writers_left[i] > 0)
        return NNT_OK;
    return update_now(opt, i);
}

static int backward_hook(void *user, nnt_layer *l)
{
    return nnt_layer_each_grad(l, writer_done, user);
}

static int check_armable(const nnt_optim *opt, const char *fn)
{
    if (opt->nparams == 0)
        return nnt_fail(opt->ctx, NNT_E_STATE, "%s: the optimizer has no parameters", fn);
    if (opt->inbwd)
        return nnt_fail(opt->ctx, NNT_E_STATE, "%s: already armed: call nnt_optim_step after "
                        "the backward first", fn);
    if (opt->opts.grad_clip > 0)
        return nnt_fail(opt->ctx, NNT_E_STATE, "%s: grad_clip is %g: global-norm clipping needs "
                        "every gradient before the first update (set grad_clip to 0, or call "
                        "nnt_optim_step alone)", fn, opt->opts.grad_clip);
    if (opt->nlayers == 0)
        return nnt_fail(opt->ctx, NNT_E_STATE, "%s: no layer was added (nnt_optim_add_layer): "
                        "nothing tells when a gradient is complete", fn);
    if (opt->ctx->backward_hook)
        return nnt_fail(opt->ctx, NNT_E_STATE, "%s: another optimizer of this context is "
                        "armed", fn);
    for (int k = 0; k < opt->nlayers; k++)
        NNT_TRY(nnt_layer_check(opt->layers[k], fn));
    return NNT_OK;
}

int nnt_optim_can_update_in_backward(const nnt_optim *opt)
{
    return opt->nparams > 0 && !opt->inbwd && !(opt->opts.grad_clip > 0) && opt->nlayers > 0 &&
           !opt->ctx->backward_hook;
}

static int alloc_inbwd(nnt_optim *opt, const char *fn)
{
    nnt_optim_inbwd *b = calloc(1, sizeof *b);
    opt->inbwd = b;
    if (!b)
        return nnt_fail(opt->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    size_t n = (size_t)opt->nparams;
    b->writers_left = calloc(n, sizeof *b->writers_left);
    b->updated = calloc(n, 1);
    b->submitted = calloc(n, 1);
    b->first = calloc(n + 1, sizeof *b->first);
    for (size_t i = 0; b->first && i < n; i++)
        b->first[i + 1] = b->first[i] + opt->params[i].grad->ntiles;
    size_t ntiles = b->first ? (size_t)b->first[n] : 0;
    b->partial = malloc((ntiles ? ntiles : 1) * sizeof *b->partial);
    b->owner = malloc((ntiles ? ntiles : 1) * sizeof *b->owner);
    if (!b->writers_left || !b->updated || !b->submitted || !b->first || !b->partial || !b->owner)
        return nnt_fail(opt->ctx, NNT_E_NOMEM, "%s: out of memory", fn);
    return NNT_OK;
}

NNT_API int nnt_optim_update_in_backward(nnt_optim *opt)
{
    const char *fn = "nnt_optim_update_in_backward";
    int rc = nnt_optim_check(opt, fn);
    if (rc == 0)
        rc = check_armable(opt, fn);
    if (rc)
        return rc;   /* armed already: stays armed */
    rc = alloc_inbwd(opt, fn);
    for (int k = 0; rc == 0 && k < opt->nlayers; k++)
        rc = nnt_layer_each_grad_tree(opt->layers[k], count_writer, opt);
    if (rc) {
        nnt_optim_inbwd_release(opt);
        return rc;
    }
    nnt_optim_inbwd *b = opt->inbwd;
    b->step = opt->step + 1;
    b->lr = nnt_optim_schedule(&opt->opts, b->step);
    b->grad_scale = 1.0 / (double)opt->opts.accum_steps;
    opt->ctx->backward_hook = backward_hook;
    opt->ctx->backward_hook_user = opt;
    return NNT_OK;
}

/* nnt_optim_step of an armed optimizer: the parameters not updated yet, then the norm. */
int nnt_optim_inbwd_step(nnt_optim *opt)
{
    const char *fn = "nnt_optim_step";
    nnt_optim_inbwd *b = opt->inbwd;
    opt->ctx->backward_hook = NULL;   /* a later backward updates nothing */
    opt->ctx->backward_hook_user = NULL;
    int rc = NNT_OK;
    for (int i = 0; rc == 0 && i < opt->nparams; i++) {
        nnt_optim_param *p = &opt->params[i];
        if (b->updated[i])
            continue;
        rc = nnt_tensor_check_readable(p->value, fn);
        if (rc == 0)
            rc = nnt_tensor_check_readable(p->grad, fn);
        if (rc)
            rc = nnt_optim_fail_param(opt, fn, p, rc);
    }
    for (int i = 0; rc == 0 && i < opt->nparams; i++)
        if (!b->updated[i])
            rc = submit_partials(opt, i);
    double sumsq = 0;
    if (rc == 0)
        rc = nnt_sumsq_gather(opt->ctx, b->first[opt->nparams], b->partial, b->owner, &sumsq);
    for (int i = 0; rc == 0 && i < opt->nparams; i++)
        if (!b->updated[i])
            rc = nnt_optim_zero_moments(opt, &opt->params[i]);
    for (int i = 0; rc == 0 && i < opt->nparams; i++)
        if (!b->updated[i])
            rc = nnt_optim_update_param(opt, &opt->params[i], b->step, b->lr, b->grad_scale);
    if (rc == 0) {
        for (int i = 0; i < opt->nparams; i++)
            opt->params[i].state_written = 1;
        opt->step = b->step;
        opt->last_lr = b->lr;
        opt->last_grad_norm = sqrt(sumsq) * b->grad_scale;
    }
    nnt_optim_inbwd_release(opt);
    return rc;
}
