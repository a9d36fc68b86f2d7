// SPDX-License-Identifier: MIT
/* RMSNorm over the last two dimensions (lib/ops/norm_heads.h). */
#include "norm_heads.h"

static int check(const char *fn, nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *rstd,
                 nnt_tensor *const *like, int nlike)
{
    NNT_TRY(nnt_check_arg(fn, "x", x, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "gamma", gamma, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "rstd", rstd, NNT_FP32, 0));
    if (x->ndim != 4 || x->grid[2] != 1 || x->grid[3] != 1 || gamma->ndim != 1 ||
        gamma->grid[0] != 1 || gamma->shape[0] != x->shape[2] * x->shape[3] || rstd->ndim != 2)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: x (B, T, H, hd) needs whole (H, hd) tiles "
                        "and gamma (H hd) one tile", fn);
    NNT_TRY(nnt_check_dims(fn, "x", x, 0, "rstd", rstd, 0, 2));
    for (int i = 0; i < nlike; i++)
        NNT_TRY(nnt_check_same_layout(fn, "x", x, "y", like[i]));
    return NNT_OK;
}

int nnt_rmsnorm_heads(nnt_tensor *x, nnt_tensor *gamma, double eps, nnt_tensor *y,
                      nnt_tensor *rstd)
{
    NNT_TRY(check("nnt_rmsnorm_heads", x, gamma, rstd, &y, 1));
    for (int64_t i = 0; i < x->ntiles; i++)
        NNT_TRY(nnt_insert_rmsnorm_fwd(x->ctx, x->tiles[i].handle, gamma->tiles[0].handle,
                                       (float)eps, y->tiles[i].handle, rstd->tiles[i].handle));
    nnt_tensor_mark_written(y);
    nnt_tensor_mark_written(rstd);
    return NNT_OK;
}

int nnt_rmsnorm_heads_backward(nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *rstd,
                               nnt_tensor *dy, nnt_tensor *dx, nnt_tensor *dgamma)
{
    nnt_tensor *like[2] = {dy, dx};
    NNT_TRY(check("nnt_rmsnorm_heads_backward", x, gamma, rstd, like, 2));
    for (int64_t i = 0; i < x->ntiles; i++)
        NNT_TRY(nnt_insert_rmsnorm_bwd(x->ctx, x->tiles[i].handle, dy->tiles[i].handle,
                                       gamma->tiles[0].handle, rstd->tiles[i].handle,
                                       dx->tiles[i].handle, dgamma->tiles[0].handle));
    nnt_tensor_mark_written(dx);
    return NNT_OK;
}
