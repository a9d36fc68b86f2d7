/* SPDX-License-Identifier: MIT */
/* Optimizer steps on tiled parameters: Adam / AdamW and SGD with momentum, PyTorch
 * semantics. One task per parameter tile; each element is updated independently, so every
 * tiling gives the same bits. The bias corrections are computed here in double. */
#include "../internal.h"

#include <math.h>

/* t plays a role next to the parameter p: FP32, p's layout, not p itself. */
static int check_like_param(const char *fn, const char *role, const nnt_tensor *t,
                            const nnt_tensor *p, int must_read)
{
    if (!t)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn, role);
    int rc = must_read ? nnt_tensor_check_readable(t, fn) : nnt_tensor_check(t, fn);
    if (rc == 0)
        rc = nnt_check_dtype(fn, role, t, NNT_FP32);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "p", p, role, t);
    if (rc == 0 && t == p)
        rc = nnt_fail(p->ctx, NNT_E_INVAL, "%s: %s and p are the same tensor", fn, role);
    return rc;
}

static int check_step(const char *fn, int64_t step)
{
    if (step >= 1)
        return NNT_OK;
    return nnt_fail(NULL, NNT_E_INVAL, "%s: step = %lld must be >= 1", fn, (long long)step);
}

/* ---- Adam / AdamW --------------------------------------------------------------------- */

/* Copy the user's options (NULL: defaults), checking the size field as nnt_ctx_create. */
static int read_adam_options(const char *fn, const nnt_adam_options *user, nnt_adam_options *o)
{
    static const nnt_adam_options defaults = NNT_ADAM_OPTIONS_INIT;
    return nnt_read_options(fn, user, &defaults, o, sizeof *o, 0,
                            "initialise them with NNT_ADAM_OPTIONS_INIT");
}

static int check_adam_options(const char *fn, const nnt_adam_options *o)
{
    int rc = nnt_check_adam_hparams(fn, o->lr, o->beta1, o->beta2, o->eps);
    if (rc == 0)
        rc = nnt_check_range(fn, "weight_decay", o->weight_decay, 0, 0, INFINITY, 0);
    if (rc == 0)
        rc = nnt_check_range(fn, "grad_scale", o->grad_scale, -INFINITY, 0, INFINITY, 0);
    if (rc == 0 && o->decoupled != 0 && o->decoupled != 1)
        rc = nnt_fail(NULL, NNT_E_INVAL, "%s: decoupled = %d is neither 0 nor 1", fn,
                      o->decoupled);
    return rc;
}

/* p, g, m, v: readable, FP32, one layout, four distinct tensors. */
static int check_adam_tensors(const char *fn, const nnt_tensor *p, const nnt_tensor *g,
                              const nnt_tensor *m, const nnt_tensor *v)
{
    int rc = nnt_check_arg(fn, "p", p, NNT_FP32, 1);
    if (rc == 0)
        rc = check_like_param(fn, "g", g, p, 1);
    if (rc == 0)
        rc = check_like_param(fn, "m", m, p, 1);
    if (rc == 0)
        rc = check_like_param(fn, "v", v, p, 1);
    if (rc == 0 && (g == m || g == v || m == v))
        rc = nnt_fail(p->ctx, NNT_E_INVAL, "%s: g, m and v must be three different tensors", fn);
    return rc;
}

int nnt_tensor_adam_step(const nnt_adam_options *opts, int64_t step, nnt_tensor *p,
                         nnt_tensor *g, nnt_tensor *m, nnt_tensor *v)
{
    const char *fn = "nnt_tensor_adam_step";
    nnt_adam_options o;
    int rc = read_adam_options(fn, opts, &o);
    if (rc == 0)
        rc = check_adam_options(fn, &o);
    if (rc == 0)
        rc = check_step(fn, step);
    if (rc == 0)
        rc = check_adam_tensors(fn, p, g, m, v);
    if (rc)
        return rc;
    float bc1 = (float)(1.0 - pow(o.beta1, (double)step));
    float bc2 = (float)(1.0 - pow(o.beta2, (double)step));
    /* p's bf16 copy (the layers' operand under bf16 products), rounded from the updated
     * values by the same tasks: the next forward does not convert p again */
    nnt_tensor *copy = p->bf16_copy;
    if (copy && (copy->dtype != NNT_BF16 || copy->ntiles != p->ntiles))
        copy = NULL;   /* (a copy is made in p's layout: not expected) */
    for (int64_t i = 0; rc == 0 && i < p->ntiles; i++) {
        rc = nnt_insert_adam_step(p->ctx, o.decoupled, (float)o.lr, (float)o.beta1,
                                  (float)o.beta2, (float)o.eps, (float)o.weight_decay, bc1, bc2,
                                  (float)o.grad_scale, p->tiles[i].handle, g->tiles[i].handle,
                                  m->tiles[i].handle, v->tiles[i].handle,
                                  copy ? copy->tiles[i].handle : NULL);
        if (rc == 0 && copy)
            nnt_tensor_copy_mark(copy, i);
    }
    if (copy)
        nnt_tensor_mark_written(copy);
    return rc;
}

/* ---- SGD with momentum ---------------------------------------------------------------- */

static int check_sgd_values(const char *fn, double lr, double momentum, double weight_decay,
                            double grad_scale, int64_t step)
{
    int rc = nnt_check_range(fn, "lr", lr, 0, 0, INFINITY, 0);
    if (rc == 0)
        rc = nnt_check_range(fn, "momentum", momentum, 0, 0, INFINITY, 0);
    if (rc == 0)
        rc = nnt_check_range(fn, "weight_decay", weight_decay, 0, 0, INFINITY, 0);
    if (rc == 0)
        rc = nnt_check_range(fn, "grad_scale", grad_scale, -INFINITY, 0, INFINITY, 0);
    if (rc == 0)
        rc = check_step(fn, step);
    return rc;
}

int nnt_tensor_sgd_step(double lr, double momentum, double weight_decay, double grad_scale,
                        int64_t step, nnt_tensor *p, nnt_tensor *g, nnt_tensor *buf)
{
    const char *fn = "nnt_tensor_sgd_step";
    int rc = check_sgd_values(fn, lr, momentum, weight_decay, grad_scale, step);
    if (rc == 0)
        rc = nnt_check_arg(fn, "p", p, NNT_FP32, 1);
    if (rc == 0)
        rc = check_like_param(fn, "g", g, p, 1);
    int first_step = step == 1;
    if (momentum == 0.0)
        buf = NULL;   /* plain SGD: no momentum buffer, buf is ignored */
    else if (rc == 0)
        rc = check_like_param(fn, "buf", buf, p, !first_step);
    if (rc == 0 && buf && buf == g)
        rc = nnt_fail(p->ctx, NNT_E_INVAL, "%s: buf and g are the same tensor", fn);
    for (int64_t i = 0; rc == 0 && i < p->ntiles; i++)
        rc = nnt_insert_sgd_step(p->ctx, (float)lr, (float)momentum, (float)weight_decay,
                                 (float)grad_scale, first_step, p->tiles[i].handle,
                                 g->tiles[i].handle, buf ? buf->tiles[i].handle : NULL);
    if (rc == 0 && buf)
        nnt_tensor_mark_written(buf);
    return rc;
}
