/* SPDX-License-Identifier: MIT */
/* RMSNorm over the last dimension of a tiled tensor (Llama's norm), built as LayerNorm is
 * (lib/ops/layernorm.c): the kernels need whole rows, so when the last dimension is split
 * over tiles the operands are retiled into temporaries whose last-dimension tile is the full
 * C (the leading tiling is kept, so the tiles of rstd still match), and the results are
 * copied back. One task per tile of rows. */
#include "../internal.h"

#include <math.h>

/* ---- forward ------------------------------------------------------------------------------ */

static int check_forward(const char *fn, nnt_tensor *x, nnt_tensor *gamma, double eps,
                         nnt_tensor *y, nnt_tensor *rstd)
{
    const char *roles[4] = {"x", "gamma", "y", "rstd"};
    nnt_tensor *all[4] = {x, gamma, y, rstd};
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++)
        rc = nnt_check_arg(fn, roles[i], all[i], NNT_FP32, 0);
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = nnt_tensor_check_readable(all[i], fn);
    if (rc)
        return rc;
    if (x->ndim < 2)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: x must have at least 2 dimensions (..., C), "
                        "not %d", fn, x->ndim);
    if (!(eps > 0 && isfinite(eps)))
        return nnt_fail(x->ctx, NNT_E_INVAL, "%s: eps %g must be finite and > 0", fn, eps);
    for (int i = 2; i < 4; i++)
        for (int j = 0; j < i; j++)
            if (all[i] == all[j])
                return nnt_fail(x->ctx, NNT_E_INVAL, "%s: %s and %s are the same tensor", fn,
                                roles[j], roles[i]);
    if ((rc = nnt_check_same_layout(fn, "x", x, "y", y)) ||
        (rc = nnt_check_row_vector(fn, "gamma", gamma, x)) ||
        (rc = nnt_check_row_stat(fn, "rstd", rstd, x)))
        return rc;
    return NNT_OK;
}

/* x, y (rows..., C) with whole rows per tile; gamma a single tile. */
static int submit_forward(nnt_tensor *x, nnt_tensor *gamma, float eps, nnt_tensor *y,
                          nnt_tensor *rstd)
{
    int rc = 0;
    for (int64_t i = 0; i < x->ntiles && rc == 0; i++)
        rc = nnt_insert_rmsnorm_fwd(x->ctx, x->tiles[i].handle, gamma->tiles[0].handle, eps,
                                    y->tiles[i].handle, rstd->tiles[i].handle);
    return rc;
}

int nnt_tensor_rmsnorm(nnt_tensor *x, nnt_tensor *gamma, double eps, nnt_tensor *y,
                       nnt_tensor *rstd)
{
    const char *fn = "nnt_tensor_rmsnorm";
    int rc = check_forward(fn, x, gamma, eps, y, rstd);
    if (rc)
        return rc;
    nnt_tensor *xw = NULL, *gw = NULL, *yw = NULL;   /* whole-row views */
    if ((rc = nnt_whole_last_in(x, &xw)) == 0 && (rc = nnt_whole_last_in(gamma, &gw)) == 0 &&
        (rc = nnt_whole_last_out(y, &yw)) == 0)
        rc = submit_forward(xw, gw, (float)eps, yw, rstd);
    if (rc == 0) {
        nnt_tensor_mark_written(rstd);
        nnt_tensor_mark_written(yw);
    }
    rc = nnt_whole_last_finish(yw, y, rc);
    nnt_whole_last_drop(xw, x);
    nnt_whole_last_drop(gw, gamma);
    return rc;
}

/* ---- backward ----------------------------------------------------------------------------- */

static int check_backward(const char *fn, nnt_tensor *const *all)
{
    static const char *const roles[6] = {"x", "gamma", "rstd", "dy", "dx", "dgamma"};
    int rc = 0;
    for (int i = 0; i < 6 && rc == 0; i++)
        rc = nnt_check_arg(fn, roles[i], all[i], NNT_FP32, 0);
    for (int i = 0; i < 6 && rc == 0; i++)
        if (i != 4)   /* dx is only written; dgamma accumulates */
            rc = nnt_tensor_check_readable(all[i], fn);
    if (rc)
        return rc;
    nnt_tensor *x = all[0];
    if (x->ndim < 2)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: x must have at least 2 dimensions (..., C), "
                        "not %d", fn, x->ndim);
    for (int i = 4; i < 6; i++)
        for (int j = 0; j < i; j++)
            if (all[i] == all[j])
                return nnt_fail(x->ctx, NNT_E_INVAL, "%s: %s and %s are the same tensor", fn,
                                roles[j], roles[i]);
    if ((rc = nnt_check_same_layout(fn, "x", x, "dy", all[3])) ||
        (rc = nnt_check_same_layout(fn, "x", x, "dx", all[4])) ||
        (rc = nnt_check_row_vector(fn, "gamma", all[1], x)) ||
        (rc = nnt_check_row_vector(fn, "dgamma", all[5], x)) ||
        (rc = nnt_check_row_stat(fn, "rstd", all[2], x)))
        return rc;
    return NNT_OK;
}

/* Whole-row views: x, dy, dx (rows..., C); gamma, dgamma single tiles. One task per row
 * tile; the tasks accumulate into dgamma in submission order. */
static int submit_backward(nnt_tensor *const *w)
{
    nnt_tensor *x = w[0], *gamma = w[1], *rstd = w[2], *dy = w[3], *dx = w[4], *dgamma = w[5];
    int rc = 0;
    for (int64_t i = 0; i < x->ntiles && rc == 0; i++)
        rc = nnt_insert_rmsnorm_bwd(x->ctx, x->tiles[i].handle, dy->tiles[i].handle,
                                    gamma->tiles[0].handle, rstd->tiles[i].handle,
                                    dx->tiles[i].handle, dgamma->tiles[0].handle);
    return rc;
}

int nnt_tensor_rmsnorm_backward(nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *rstd,
                                nnt_tensor *dy, nnt_tensor *dx, nnt_tensor *dgamma)
{
    const char *fn = "nnt_tensor_rmsnorm_backward";
    nnt_tensor *all[6] = {x, gamma, rstd, dy, dx, dgamma};
    int rc = check_backward(fn, all);
    if (rc)
        return rc;
    /* whole-row views; dgamma is a retiled copy (it accumulates) */
    nnt_tensor *w[6] = {NULL, NULL, rstd, NULL, NULL, NULL};
    if ((rc = nnt_whole_last_in(x, &w[0])) == 0 && (rc = nnt_whole_last_in(gamma, &w[1])) == 0 &&
        (rc = nnt_whole_last_in(dy, &w[3])) == 0 && (rc = nnt_whole_last_out(dx, &w[4])) == 0 &&
        (rc = nnt_whole_last_in(dgamma, &w[5])) == 0)
        rc = submit_backward(w);
    if (rc == 0)
        nnt_tensor_mark_written(w[4]);
    rc = nnt_whole_last_finish(w[4], dx, rc);
    rc = nnt_whole_last_finish(w[5], dgamma, rc);
    nnt_whole_last_drop(w[0], x);
    nnt_whole_last_drop(w[1], gamma);
    nnt_whole_last_drop(w[3], dy);
    return rc;
}
