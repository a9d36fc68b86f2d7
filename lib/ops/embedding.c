/* SPDX-License-Identifier: MIT */
/* Token and position embeddings of a tiled (B, T, C) activation, and their gradients.
 * Forward, per out tile (b-tile, t-tile, c-tile): one gather task per vocabulary tile of
 * wte (the first one zeroes the tile, so ids outside [0, V) give zero rows; under MPI on the
 * rank of the wte tile, the out tile travelling), then one task
 * adding the wpe tile to every batch row. Backward: every dwte tile receives one
 * scatter-add task per (b-tile, t-tile) in a fixed order, every dwpe tile one column-sum
 * task per b-tile. */
#include "../internal.h"

/* NNT_E_INVAL naming role if t is NULL; else a usable, readable tensor of dtype and ndim
 * (NNT_E_SHAPE otherwise). */
static int check_input(const char *fn, const char *role, const nnt_tensor *t, nnt_dtype dtype,
                       int ndim)
{
    int rc = nnt_check_arg(fn, role, t, dtype, 1);
    if (rc == 0 && t->ndim != ndim)
        rc = nnt_fail(t->ctx, NNT_E_SHAPE, "%s: %s must have %d dimensions, not %d", fn, role,
                      ndim, t->ndim);
    return rc;
}

/* act (B, T, C) against tokens (B, T), table (V, C) and pos (maxT, C) or NULL. */
static int check_layout(const char *fn, const char *act_role, const nnt_tensor *act,
                        const nnt_tensor *tokens, const char *table_role,
                        const nnt_tensor *table, const char *pos_role, const nnt_tensor *pos)
{
    int rc = nnt_check_dims(fn, "tokens", tokens, 0, act_role, act, 0, 2);
    if (rc == 0)
        rc = nnt_check_dims(fn, table_role, table, 1, act_role, act, 2, 1);
    if (rc || !pos)
        return rc;
    if ((rc = nnt_check_dims(fn, pos_role, pos, 1, act_role, act, 2, 1)))
        return rc;
    if (pos->shape[0] < act->shape[1])
        return nnt_fail(act->ctx, NNT_E_SHAPE, "%s: %s has %lld rows, fewer than T = %lld", fn,
                        pos_role, (long long)pos->shape[0], (long long)act->shape[1]);
    if (pos->tile[0] != act->tile[1])
        return nnt_fail(act->ctx, NNT_E_SHAPE, "%s: the row tile %lld of %s differs from the "
                        "T tile %lld of %s (retile with nnt_tensor_copy)", fn,
                        (long long)pos->tile[0], pos_role, (long long)act->tile[1], act_role);
    return NNT_OK;
}

/* Tile indices of the tokens tile and the activation tile at (bi, ti, ci). */
static int64_t act_tile(const nnt_tensor *act, int64_t bi, int64_t ti, int64_t ci)
{
    return (bi * act->grid[1] + ti) * act->grid[2] + ci;
}

/* ---- forward ------------------------------------------------------------------------------ */

/* All tasks of one out tile (bi, ti, ci). One gather per vocabulary tile, the first of
 * them zeroing the tile; each row is written by one vocabulary tile only, so their order
 * changes no bit. Under MPI the gathers run where the table's tiles are: the out tile visits
 * the ranks in turn from its owner's (starpu_mpi_data_migrate, only when the rank changes)
 * and comes back, so a (b, t, c) tile travels instead of the whole table (GPT-2 124M:
 * 256 x 768 floats against 7 tiles of 7232 x 768). */
static int forward_tile(nnt_tensor *tokens, nnt_tensor *wte, nnt_tensor *wpe, nnt_tensor *out,
                        int64_t bi, int64_t ti, int64_t ci)
{
    nnt_ctx *ctx = out->ctx;
    starpu_data_handle_t tok = tokens->tiles[bi * tokens->grid[1] + ti].handle;
    int64_t o = act_tile(out, bi, ti, ci);
    starpu_data_handle_t oh = out->tiles[o].handle;
    const int home = out->tiles[o].owner, nranks = ctx->mpi ? ctx->nranks : 1;
    int rc = 0, at = home, first = 1;
    for (int k = 0; k < nranks && rc == 0; k++) {
        int r = (home + k) % nranks;
        for (int64_t vj = 0; vj < wte->grid[0] && rc == 0; vj++) {
            const nnt_tile *w = &wte->tiles[vj * wte->grid[1] + ci];
            if (nranks > 1 && w->owner != r)
                continue;
            if (r != at) {
                nnt_mpi_migrate(ctx, oh, r, !first);
                at = r;
            }
            rc = nnt_insert_embedding_gather(ctx, tok, w->handle, vj * wte->tile[0], first, oh);
            first = 0;
        }
    }
    if (at != home)
        nnt_mpi_migrate(ctx, oh, home, 1);
    if (rc || !wpe)
        return rc;
    int64_t shape[3];   // (bt, tt, ct)
    nnt_tensor_tile_shape_at(out, o, shape);
    return nnt_insert_embedding_add_pos(ctx, wpe->tiles[ti * wpe->grid[1] + ci].handle,
                                        shape[0], shape[1] * shape[2], oh);
}

int nnt_tensor_embedding(nnt_tensor *tokens, nnt_tensor *wte, nnt_tensor *wpe,
                         nnt_tensor *out)
{
    const char *fn = "nnt_tensor_embedding";
    int rc = check_input(fn, "tokens", tokens, NNT_INT32, 2);
    if (rc == 0)   /* a bf16 table (a frozen model's, kept in bf16) is read widened */
        rc = check_input(fn, "wte", wte, wte && wte->dtype == NNT_BF16 ? NNT_BF16 : NNT_FP32, 2);
    if (rc == 0 && wpe)
        rc = check_input(fn, "wpe", wpe, NNT_FP32, 2);
    if (rc == 0 && !out)
        rc = nnt_fail(NULL, NNT_E_INVAL, "%s: out is NULL", fn);
    if (rc == 0)
        rc = nnt_tensor_check(out, fn);
    if (rc == 0)
        rc = nnt_check_dtype(fn, "out", out, NNT_FP32);
    if (rc == 0 && out->ndim != 3)
        rc = nnt_fail(out->ctx, NNT_E_SHAPE, "%s: out must have 3 dimensions (B, T, C), not %d",
                      fn, out->ndim);
    if (rc == 0)
        rc = check_layout(fn, "out", out, tokens, "wte", wte, "wpe", wpe);
    if (rc)
        return rc;
    for (int64_t bi = 0; bi < out->grid[0] && rc == 0; bi++)
        for (int64_t ti = 0; ti < out->grid[1] && rc == 0; ti++)
            for (int64_t ci = 0; ci < out->grid[2] && rc == 0; ci++)
                rc = forward_tile(tokens, wte, wpe, out, bi, ti, ci);
    if (rc == 0)
        nnt_tensor_mark_written(out);
    return rc;
}

/* ---- backward ----------------------------------------------------------------------------- */

/* All tasks reading the dout tile (bi, ti, ci): one scatter-add per dwte vocabulary tile and
 * the column sum into the dwpe tile. */
static int backward_tile(nnt_tensor *tokens, nnt_tensor *dout, nnt_tensor *dwte,
                         nnt_tensor *dwpe, int64_t bi, int64_t ti, int64_t ci)
{
    nnt_ctx *ctx = dout->ctx;
    starpu_data_handle_t tok = tokens->tiles[bi * tokens->grid[1] + ti].handle;
    int64_t o = act_tile(dout, bi, ti, ci);
    starpu_data_handle_t dh = dout->tiles[o].handle;
    int rc = 0;
    for (int64_t vj = 0; vj < dwte->grid[0] && rc == 0; vj++)
        rc = nnt_insert_embedding_scatter(ctx, tok, dh, vj * dwte->tile[0],
                                          dwte->tiles[vj * dwte->grid[1] + ci].handle);
    if (rc || !dwpe)
        return rc;
    int64_t shape[3];   // (bt, tt, ct)
    nnt_tensor_tile_shape_at(dout, o, shape);
    return nnt_insert_embedding_sum_pos(ctx, dh, shape[0], shape[1] * shape[2],
                                        dwpe->tiles[ti * dwpe->grid[1] + ci].handle);
}

int nnt_tensor_embedding_backward(nnt_tensor *tokens, nnt_tensor *dout, nnt_tensor *dwte,
                                  nnt_tensor *dwpe)
{
    const char *fn = "nnt_tensor_embedding_backward";
    int rc = check_input(fn, "tokens", tokens, NNT_INT32, 2);
    if (rc == 0)
        rc = check_input(fn, "dout", dout, NNT_FP32, 3);
    if (rc == 0)
        rc = check_input(fn, "dwte", dwte, NNT_FP32, 2);
    if (rc == 0 && dwpe)
        rc = check_input(fn, "dwpe", dwpe, NNT_FP32, 2);
    if (rc == 0 && dwte == dwpe)
        rc = nnt_fail(dwte->ctx, NNT_E_INVAL, "%s: dwte and dwpe are the same tensor", fn);
    if (rc == 0)
        rc = check_layout(fn, "dout", dout, tokens, "dwte", dwte, "dwpe", dwpe);
    if (rc)
        return rc;
    /* (b, t) tiles in increasing order: every dwte / dwpe tile accumulates in that order */
    for (int64_t bi = 0; bi < dout->grid[0] && rc == 0; bi++)
        for (int64_t ti = 0; ti < dout->grid[1] && rc == 0; ti++)
            for (int64_t ci = 0; ci < dout->grid[2] && rc == 0; ci++)
                rc = backward_tile(tokens, dout, dwte, dwpe, bi, ti, ci);
    return rc;
}
