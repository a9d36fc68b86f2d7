/* SPDX-License-Identifier: MIT */
/* LayerNorm over the last dimension of a tiled tensor. The kernels need whole rows, so when
 * the last dimension is split over tiles the operands are retiled into temporaries whose
 * last-dimension tile is the full C (the leading tiling is kept, so the tiles of mean and
 * rstd still match), and the results are copied back. One task per tile of rows. */
#include "../internal.h"

#include <math.h>

/* ---- forward ------------------------------------------------------------------------------ */

static int check_forward(const char *fn, nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *beta,
                         double eps, nnt_tensor *y, nnt_tensor *mean, nnt_tensor *rstd)
{
    const char *roles[6] = {"x", "gamma", "beta", "y", "mean", "rstd"};
    nnt_tensor *all[6] = {x, gamma, beta, y, mean, rstd};
    int rc = 0;
    for (int i = 0; i < 6 && rc == 0; i++)
        rc = nnt_check_arg(fn, roles[i], all[i], NNT_FP32, 0);
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = nnt_tensor_check_readable(all[i], fn);
    if (rc)
        return rc;
    if (x->ndim < 2)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: x must have at least 2 dimensions (..., C), "
                        "not %d", fn, x->ndim);
    if (!(eps >= 0 && isfinite(eps)))
        return nnt_fail(x->ctx, NNT_E_INVAL, "%s: eps %g must be finite and >= 0", fn, eps);
    for (int i = 3; i < 6; i++)
        for (int j = 0; j < i; j++)
            if (all[i] == all[j])
                return nnt_fail(x->ctx, NNT_E_INVAL, "%s: %s and %s are the same tensor", fn,
                                roles[j], roles[i]);
    if ((rc = nnt_check_same_layout(fn, "x", x, "y", y)) ||
        (rc = nnt_check_row_vector(fn, "gamma", gamma, x)) ||
        (rc = nnt_check_row_vector(fn, "beta", beta, x)) ||
        (rc = nnt_check_row_stat(fn, "mean", mean, x)) ||
        (rc = nnt_check_row_stat(fn, "rstd", rstd, x)))
        return rc;
    return NNT_OK;
}

/* x, y (rows..., C) with whole rows per tile; gamma, beta single tiles. */
static int submit_forward(nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *beta, float eps,
                          nnt_tensor *y, nnt_tensor *mean, nnt_tensor *rstd)
{
    int rc = 0;
    for (int64_t i = 0; i < x->ntiles && rc == 0; i++)
        rc = nnt_insert_layernorm_fwd(x->ctx, x->tiles[i].handle, gamma->tiles[0].handle,
                                      beta->tiles[0].handle, eps, y->tiles[i].handle,
                                      mean->tiles[i].handle, rstd->tiles[i].handle);
    return rc;
}

int nnt_tensor_layernorm(nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *beta, double eps,
                         nnt_tensor *y, nnt_tensor *mean, nnt_tensor *rstd)
{
    const char *fn = "nnt_tensor_layernorm";
    int rc = check_forward(fn, x, gamma, beta, eps, y, mean, rstd);
    if (rc)
        return rc;
    nnt_tensor *xw = NULL, *gw = NULL, *bw = NULL, *yw = NULL;   /* whole-row views */
    if ((rc = nnt_whole_last_in(x, &xw)) == 0 && (rc = nnt_whole_last_in(gamma, &gw)) == 0 &&
        (rc = nnt_whole_last_in(beta, &bw)) == 0 && (rc = nnt_whole_last_out(y, &yw)) == 0)
        rc = submit_forward(xw, gw, bw, (float)eps, yw, mean, rstd);
    if (rc == 0) {
        nnt_tensor_mark_written(mean);
        nnt_tensor_mark_written(rstd);
        nnt_tensor_mark_written(yw);
    }
    rc = nnt_whole_last_finish(yw, y, rc);
    nnt_whole_last_drop(xw, x);
    nnt_whole_last_drop(gw, gamma);
    nnt_whole_last_drop(bw, beta);
    return rc;
}

/* ---- backward ----------------------------------------------------------------------------- */

static int check_backward(const char *fn, nnt_tensor *const *all)
{
    static const char *const roles[8] = {"x", "gamma", "mean", "rstd", "dy",
                                         "dx", "dgamma", "dbeta"};
    int rc = 0;
    for (int i = 0; i < 8 && rc == 0; i++)
        rc = nnt_check_arg(fn, roles[i], all[i], NNT_FP32, 0);
    for (int i = 0; i < 8 && rc == 0; i++)
        if (i != 5)   /* dx is only written; dgamma, dbeta accumulate */
            rc = nnt_tensor_check_readable(all[i], fn);
    if (rc)
        return rc;
    nnt_tensor *x = all[0];
    if (x->ndim < 2)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: x must have at least 2 dimensions (..., C), "
                        "not %d", fn, x->ndim);
    for (int i = 5; i < 8; i++)
        for (int j = 0; j < i; j++)
            if (all[i] == all[j])
                return nnt_fail(x->ctx, NNT_E_INVAL, "%s: %s and %s are the same tensor", fn,
                                roles[j], roles[i]);
    if ((rc = nnt_check_same_layout(fn, "x", x, "dy", all[4])) ||
        (rc = nnt_check_same_layout(fn, "x", x, "dx", all[5])) ||
        (rc = nnt_check_row_vector(fn, "gamma", all[1], x)) ||
        (rc = nnt_check_row_vector(fn, "dgamma", all[6], x)) ||
        (rc = nnt_check_row_vector(fn, "dbeta", all[7], x)) ||
        (rc = nnt_check_row_stat(fn, "mean", all[2], x)) ||
        (rc = nnt_check_row_stat(fn, "rstd", all[3], x)))
        return rc;
    return NNT_OK;
}

/* Whole-row views: x, dy, dx (rows..., C); gamma, dgamma, dbeta single tiles. One task per
 * row tile; the tasks accumulate into dgamma and dbeta in submission order. */
static int submit_backward(nnt_tensor *const *w)
{
    nnt_tensor *x = w[0], *gamma = w[1], *mean = w[2], *rstd = w[3], *dy = w[4], *dx = w[5],
               *dgamma = w[6], *dbeta = w[7];
    int rc = 0;
    for (int64_t i = 0; i < x->ntiles && rc == 0; i++)
        rc = nnt_insert_layernorm_bwd(x->ctx, x->tiles[i].handle, dy->tiles[i].handle,
                                      gamma->tiles[0].handle, mean->tiles[i].handle,
                                      rstd->tiles[i].handle, dx->tiles[i].handle,
                                      dgamma->tiles[0].handle, dbeta->tiles[0].handle);
    return rc;
}

int nnt_tensor_layernorm_backward(nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *mean,
                                  nnt_tensor *rstd, nnt_tensor *dy, nnt_tensor *dx,
                                  nnt_tensor *dgamma, nnt_tensor *dbeta)
{
    const char *fn = "nnt_tensor_layernorm_backward";
    nnt_tensor *all[8] = {x, gamma, mean, rstd, dy, dx, dgamma, dbeta};
    int rc = check_backward(fn, all);
    if (rc)
        return rc;
    /* whole-row views; dgamma and dbeta are retiled copies (they accumulate) */
    nnt_tensor *w[8] = {NULL, NULL, mean, rstd, NULL, NULL, NULL, NULL};
    if ((rc = nnt_whole_last_in(x, &w[0])) == 0 && (rc = nnt_whole_last_in(gamma, &w[1])) == 0 &&
        (rc = nnt_whole_last_in(dy, &w[4])) == 0 && (rc = nnt_whole_last_out(dx, &w[5])) == 0 &&
        (rc = nnt_whole_last_in(dgamma, &w[6])) == 0 && (rc = nnt_whole_last_in(dbeta, &w[7])) == 0)
        rc = submit_backward(w);
    if (rc == 0)
        nnt_tensor_mark_written(w[5]);
    rc = nnt_whole_last_finish(w[5], dx, rc);
    rc = nnt_whole_last_finish(w[6], dgamma, rc);
    rc = nnt_whole_last_finish(w[7], dbeta, rc);
    nnt_whole_last_drop(w[0], x);
    nnt_whole_last_drop(w[1], gamma);
    nnt_whole_last_drop(w[4], dy);
    return rc;
}
