/* SPDX-License-Identifier: MIT */
/* Softmax cross-entropy over the last dimension of tiled logits (N..., V), with V split
 * over any number of tiles. Forward, per row tile: one block task per vocabulary tile in
 * increasing order (online max m and sum s, the target's logit tgt), then one task writing
 * loss and lse = m + log(s). Backward: one task per (row tile, vocabulary tile) with
 * m = lse and s = 1, writing dlogits (in place when dlogits is logits).
 *
 * Label smoothing eps: the target distribution (1 - eps) one-hot + eps / V. The forward
 * blocks also keep the sum d of each row's logit - m (moved as m grows), and the loss is
 * (1 - eps) (lse - x_t) + eps (log s - d / V), the second term lse - the mean logit without
 * the cancellation of two large numbers; the gradient
 * scale w (softmax - (1 - eps) one-hot - eps / V). */
#include "../internal.h"

#include <math.h>

/* logits (N..., V) with at least 2 dimensions; row (N...) with logits' leading layout. */
static int check_rows(const char *fn, const nnt_tensor *logits, const char *role,
                      const nnt_tensor *row)
{
    if (logits->ndim < 2)
        return nnt_fail(logits->ctx, NNT_E_SHAPE, "%s: logits must have at least 2 dimensions "
                        "(N..., V), not %d", fn, logits->ndim);
    if (row->ndim != logits->ndim - 1)
        return nnt_fail(logits->ctx, NNT_E_SHAPE, "%s: %s has %d dimensions; it must have the "
                        "%d leading dimensions of logits", fn, role, row->ndim,
                        logits->ndim - 1);
    return nnt_check_dims(fn, "logits", logits, 0, role, row, 0, row->ndim);
}

/* ---- forward ------------------------------------------------------------------------------ */

/* Tasks of row tile r; m, s, tgt, d: temporaries with targets' layout (d NULL: no
 * smoothing). */
static int forward_row_tile(nnt_tensor *logits, nnt_tensor *targets, int32_t ignore_index,
                            double eps, nnt_tensor *loss, nnt_tensor *lse,
                            nnt_tensor *const *mst, int64_t r)
{
    int64_t nvt = logits->grid[logits->ndim - 1], vtile = logits->tile[logits->ndim - 1];
    starpu_data_handle_t m = mst[0]->tiles[r].handle, s = mst[1]->tiles[r].handle,
                         tgt = mst[2]->tiles[r].handle, tg = targets->tiles[r].handle,
                         d = mst[3] ? mst[3]->tiles[r].handle : NULL;
    int rc = 0;
    for (int64_t vj = 0; vj < nvt && rc == 0; vj++) {
        starpu_data_handle_t h[6] = {logits->tiles[r * nvt + vj].handle, tg, m, s, tgt, d};
        rc = nnt_insert_xent_fwd_block(logits->ctx, h, vj * vtile, vj == 0);
    }
    if (rc)
        return rc;
    starpu_data_handle_t h[7] = {tg, m, s, tgt, loss->tiles[r].handle, lse->tiles[r].handle,
                                 d};
    return nnt_insert_xent_finish(logits->ctx, h, ignore_index, (float)eps,
                                  logits->shape[logits->ndim - 1]);
}

/* eps: label smoothing in [0, 1). */
static int check_smoothing(const char *fn, const nnt_tensor *logits, double eps)
{
    if (eps >= 0.0 && eps < 1.0)
        return NNT_OK;
    return nnt_fail(logits ? logits->ctx : NULL, NNT_E_INVAL, "%s: label smoothing %g is "
                    "outside [0, 1)", fn, eps);
}

static int forward(nnt_tensor *logits, nnt_tensor *targets, int32_t ignore_index, double eps,
                   nnt_tensor *loss, nnt_tensor *lse, const char *fn)
{
    int rc = nnt_check_arg(fn, "logits", logits, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "targets", targets, NNT_INT32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "loss", loss, NNT_FP32, 0);
    if (rc == 0)
        rc = nnt_check_arg(fn, "lse", lse, NNT_FP32, 0);
    if (rc == 0 && (loss == lse || loss == logits || lse == logits))
        rc = nnt_fail(logits->ctx, NNT_E_INVAL, "%s: logits, loss and lse must be three "
                      "different tensors", fn);
    if (rc == 0)
        rc = check_rows(fn, logits, "targets", targets);
    if (rc == 0)
        rc = check_rows(fn, logits, "loss", loss);
    if (rc == 0)
        rc = check_rows(fn, logits, "lse", lse);
    if (rc == 0)
        rc = check_smoothing(fn, logits, eps);
    if (rc)
        return rc;
    /* running max, running sum, target logit, [the sum of logit - running max] */
    nnt_tensor *mst[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < (eps > 0.0 ? 4 : 3) && rc == 0; i++)
        rc = nnt_temp_create(logits->ctx, NNT_FP32, targets->ndim, targets->shape,
                             targets->tile, &mst[i]);
    for (int64_t r = 0; r < targets->ntiles && rc == 0; r++)
        rc = forward_row_tile(logits, targets, ignore_index, eps, loss, lse, mst, r);
    for (int i = 0; i < 4; i++)
        nnt_temp_release(mst[i]);
    if (rc == 0) {
        nnt_tensor_mark_written(loss);
        nnt_tensor_mark_written(lse);
    }
    return rc;
}

int nnt_tensor_cross_entropy(nnt_tensor *logits, nnt_tensor *targets, int32_t ignore_index,
                             nnt_tensor *loss, nnt_tensor *lse)
{
    return forward(logits, targets, ignore_index, 0.0, loss, lse, "nnt_tensor_cross_entropy");
}

int nnt_tensor_cross_entropy_smoothed(nnt_tensor *logits, nnt_tensor *targets,
                                      int32_t ignore_index, double epsilon, nnt_tensor *loss,
                                      nnt_tensor *lse)
{
    return forward(logits, targets, ignore_index, epsilon, loss, lse,
                   "nnt_tensor_cross_entropy_smoothed");
}

/* ---- backward ----------------------------------------------------------------------------- */

/* weights: (N...) per-row factors of the gradient, lse's layout; NULL: every row 1. */
static int backward(nnt_tensor *logits, nnt_tensor *targets, int32_t ignore_index,
                    nnt_tensor *lse, double eps, double scale, nnt_tensor *weights,
                    nnt_tensor *dlogits, const char *fn)
{
    int rc = nnt_check_arg(fn, "logits", logits, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "targets", targets, NNT_INT32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "lse", lse, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "dlogits", dlogits, NNT_FP32, 0);
    if (rc == 0 && !isfinite(scale))
        rc = nnt_fail(logits->ctx, NNT_E_INVAL, "%s: scale %g is not finite", fn, scale);
    if (rc == 0 && lse == logits)
        rc = nnt_fail(logits->ctx, NNT_E_INVAL, "%s: lse and logits are the same tensor", fn);
    if (rc == 0)
        rc = check_rows(fn, logits, "targets", targets);
    if (rc == 0)
        rc = check_rows(fn, logits, "lse", lse);
    if (rc == 0 && dlogits != logits)
        rc = nnt_check_same_layout(fn, "logits", logits, "dlogits", dlogits);
    if (rc == 0 && weights)
        rc = nnt_check_arg(fn, "weights", weights, NNT_FP32, 1);
    if (rc == 0 && weights)
        rc = nnt_check_same_layout(fn, "lse", lse, "weights", weights);
    if (rc == 0 && weights && (weights == dlogits || weights == logits))
        rc = nnt_fail(logits->ctx, NNT_E_INVAL, "%s: weights must not be logits or dlogits", fn);
    if (rc == 0)
        rc = check_smoothing(fn, logits, eps);
    if (rc)
        return rc;
    nnt_tensor *ones = NULL;   /* the softmax sum s = 1 once m = lse; targets' layout */
    rc = nnt_temp_create(logits->ctx, NNT_FP32, targets->ndim, targets->shape, targets->tile,
                         &ones);
    int64_t nvt = logits->grid[logits->ndim - 1], vtile = logits->tile[logits->ndim - 1];
    for (int64_t r = 0; r < targets->ntiles && rc == 0; r++) {
        rc = nnt_insert_fill(ones, ones->tiles[r].handle, 1.0);
        for (int64_t vj = 0; vj < nvt && rc == 0; vj++) {
            int64_t li = r * nvt + vj;
            starpu_data_handle_t h[6] = {logits->tiles[li].handle, targets->tiles[r].handle,
                                         lse->tiles[r].handle, ones->tiles[r].handle,
                                         dlogits->tiles[li].handle,
                                         weights ? weights->tiles[r].handle : NULL};
            rc = nnt_insert_xent_bwd_block(logits->ctx, h, vj * vtile, ignore_index,
                                           (float)scale, (float)eps,
                                           logits->shape[logits->ndim - 1]);
        }
    }
    nnt_temp_release(ones);
    if (rc == 0)
        nnt_tensor_mark_written(dlogits);
    return rc;
}

int nnt_tensor_cross_entropy_backward(nnt_tensor *logits, nnt_tensor *targets,
                                      int32_t ignore_index, nnt_tensor *lse, double scale,
                                      nnt_tensor *dlogits)
{
    return backward(logits, targets, ignore_index, lse, 0.0, scale, NULL, dlogits,
                    "nnt_tensor_cross_entropy_backward");
}

int nnt_tensor_cross_entropy_backward_ex(nnt_tensor *logits, nnt_tensor *targets,
                                         int32_t ignore_index, nnt_tensor *lse, double scale,
                                         nnt_tensor *weights, nnt_tensor *dlogits)
{
    return backward(logits, targets, ignore_index, lse, 0.0, scale, weights, dlogits,
                    "nnt_tensor_cross_entropy_backward_ex");
}

int nnt_tensor_cross_entropy_smoothed_backward(nnt_tensor *logits, nnt_tensor *targets,
                                               int32_t ignore_index, nnt_tensor *lse,
                                               double epsilon, double scale,
                                               nnt_tensor *weights, nnt_tensor *dlogits)
{
    return backward(logits, targets, ignore_index, lse, epsilon, scale, weights, dlogits,
                    "nnt_tensor_cross_entropy_smoothed_backward");
}
