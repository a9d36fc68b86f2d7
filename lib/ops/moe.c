// SPDX-License-Identifier: MIT
/* Mixture-of-experts operations on tiled tensors (lib/ops/moe.h): the routing, one task per
 * tile of tokens, and the row maps between an activation (B, T, C) and an expert's rows
 * (n, C): one task per pair of a tile of tokens and a tile of the expert's rows that share
 * tokens, per channel tile, its triples in the task's arguments. */
#include "moe.h"

#include <stdlib.h>

/* ---- routing ------------------------------------------------------------------------------ */

int nnt_moe_route(nnt_tensor *logits, int64_t k, int norm, nnt_tensor *probs, nnt_tensor *idx,
                  nnt_tensor *w)
{
    const char *fn = "nnt_moe_route";
    NNT_TRY(nnt_check_arg(fn, "logits", logits, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "probs", probs, NNT_FP32, 0));
    NNT_TRY(nnt_check_arg(fn, "idx", idx, NNT_INT32, 0));
    NNT_TRY(nnt_check_arg(fn, "w", w, NNT_FP32, 0));
    NNT_TRY(nnt_check_same_layout(fn, "logits", logits, "probs", probs));
    int nd = logits->ndim;
    int64_t E = logits->shape[nd - 1];
    if (logits->grid[nd - 1] != 1 || idx->ndim != nd || w->ndim != nd ||
        idx->shape[nd - 1] != k || idx->grid[nd - 1] != 1 || k < 1 || k > E ||
        E > NNT_MOE_MAX_EXPERTS)
        return nnt_fail(logits->ctx, NNT_E_SHAPE, "%s: logits (..., E = %lld) and idx, w "
                        "(..., k = %lld) need their last dimension in one tile, 1 <= k <= E <= "
                        "%d", fn, (long long)E, (long long)k, NNT_MOE_MAX_EXPERTS);
    NNT_TRY(nnt_check_dims(fn, "logits", logits, 0, "idx", idx, 0, nd - 1));
    NNT_TRY(nnt_check_same_layout(fn, "idx", idx, "w", w));
    for (int64_t i = 0; i < logits->ntiles; i++)
        NNT_TRY(nnt_insert_moe_route(logits->ctx, E, k, norm, logits->tiles[i].handle,
                                     probs->tiles[i].handle, idx->tiles[i].handle,
                                     w->tiles[i].handle));
    nnt_tensor_mark_written(probs);
    nnt_tensor_mark_written(idx);
    nnt_tensor_mark_written(w);
    return NNT_OK;
}

int nnt_moe_route_backward(nnt_tensor *probs, nnt_tensor *idx, nnt_tensor *w, int norm,
                           nnt_tensor *dw, const float *aux, nnt_tensor *dlogits)
{
    const char *fn = "nnt_moe_route_backward";
    NNT_TRY(nnt_check_arg(fn, "probs", probs, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "idx", idx, NNT_INT32, 1));
    NNT_TRY(nnt_check_arg(fn, "w", w, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "dw", dw, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "dlogits", dlogits, NNT_FP32, 0));
    NNT_TRY(nnt_check_same_layout(fn, "probs", probs, "dlogits", dlogits));
    NNT_TRY(nnt_check_same_layout(fn, "w", w, "dw", dw));
    NNT_TRY(nnt_check_same_layout(fn, "w", w, "idx", idx));
    int64_t E = probs->shape[probs->ndim - 1], k = w->shape[w->ndim - 1];
    for (int64_t i = 0; i < probs->ntiles; i++)
        NNT_TRY(nnt_insert_moe_route_bwd(probs->ctx, E, k, norm, aux, probs->tiles[i].handle,
                                         idx->tiles[i].handle, w->tiles[i].handle,
                                         dw->tiles[i].handle, dlogits->tiles[i].handle));
    nnt_tensor_mark_written(dlogits);
    return NNT_OK;
}

/* ---- row maps ----------------------------------------------------------------------------- */

enum { KIND_GATHER, KIND_SCATTER, KIND_WGRAD };

/* Where token n of an activation (B, T, ...) lies: its tile of tokens (linear over the
 * (B, T) grid) and its row in that tile. */
static void token_place(const nnt_tensor *act, int64_t n, int64_t *tile, int64_t *row)
{
    int64_t T = act->shape[1], b = n / T, t = n % T;
    int64_t bt = b / act->tile[0], tt = t / act->tile[1];
    int64_t t0 = tt * act->tile[1], rows_t = T - t0 < act->tile[1] ? T - t0 : act->tile[1];
    *tile = bt * act->grid[1] + tt;
    *row = (b - bt * act->tile[0]) * rows_t + (t - t0);
}

static int check_maps(const char *fn, nnt_tensor *act, nnt_tensor *w, const nnt_moe_rows *rows,
                      nnt_tensor *xe)
{
    if (act->ndim != 3 || xe->ndim != 2 || xe->shape[0] != rows->n ||
        xe->shape[1] != act->shape[2] || xe->tile[1] != act->tile[2])
        return nnt_fail(act->ctx, NNT_E_SHAPE, "%s: needs an activation (B, T, C) and expert "
                        "rows (n, C) with the same channel tiling", fn);
    if (w && (w->ndim != 3 || w->grid[2] != 1))
        return nnt_fail(act->ctx, NNT_E_SHAPE, "%s: w must be (B, T, k), k in one tile", fn);
    if (w)
        NNT_TRY(nnt_check_dims(fn, "activation", act, 0, "w", w, 0, 2));
    return NNT_OK;
}

/* Submit the tasks of one kind for the rows: for each tile of the expert's rows, in order,
 * its rows grouped by tile of tokens (in tile order), per channel tile. */
static int submit_maps(int kind, nnt_tensor *act, nnt_tensor *w, const nnt_moe_rows *rows,
                       nnt_tensor *xe)
{
    nnt_ctx *ctx = act->ctx;
    int64_t ntok = act->grid[0] * act->grid[1], R = xe->tile[0], k = w ? w->shape[2] : 1;
    int64_t *count = calloc((size_t)ntok, sizeof *count);
    int32_t *maps = malloc((size_t)(R * 3 * ntok) * sizeof *maps);
    int64_t *tile_of = malloc((size_t)R * sizeof *tile_of), *row_of = malloc((size_t)R * sizeof *row_of);
    int rc = count && maps && tile_of && row_of ? NNT_OK
             : nnt_fail(ctx, NNT_E_NOMEM, "nnt_moe: out of host memory");
    for (int64_t rt = 0; rc == 0 && rt < xe->grid[0]; rt++) {
        int64_t r0 = rt * R, nr = rows->n - r0 < R ? rows->n - r0 : R;
        for (int64_t j = 0; j < nr; j++)
            token_place(act, rows->token[r0 + j], &tile_of[j], &row_of[j]);
        /* bucket j's triples at maps + 3 R j ... (R rows at most per bucket) */
        for (int64_t j = 0; j < ntok; j++)
            count[j] = 0;
        for (int64_t j = 0; j < nr; j++) {
            int32_t *m = maps + 3 * (R * tile_of[j] + count[tile_of[j]]++);
            int32_t tok = (int32_t)row_of[j], mine = (int32_t)j;
            m[0] = kind == KIND_SCATTER ? mine : tok;
            m[1] = kind == KIND_SCATTER ? tok : mine;
            m[2] = rows->slot[r0 + j];
        }
        int first = 1;
        for (int64_t tt = 0; rc == 0 && tt < ntok; tt++) {
            if (!count[tt])
                continue;
            for (int64_t c = 0; rc == 0 && c < xe->grid[1]; c++) {
                int64_t c0 = c * xe->tile[1];
                int64_t width = xe->shape[1] - c0 < xe->tile[1] ? xe->shape[1] - c0 : xe->tile[1];
                starpu_data_handle_t a = act->tiles[tt * act->grid[2] + c].handle;
                starpu_data_handle_t e = xe->tiles[rt * xe->grid[1] + c].handle;
                starpu_data_handle_t wt = w ? w->tiles[tt].handle : NULL;
                const int32_t *m = maps + 3 * R * tt;
                if (kind == KIND_GATHER)
                    rc = nnt_insert_moe_gather(ctx, width, k, count[tt], m, a, wt, e, first);
                else if (kind == KIND_SCATTER)
                    rc = nnt_insert_moe_scatter_add(ctx, width, k, count[tt], m, e, wt, a);
                else
                    rc = nnt_insert_moe_weight_grad(ctx, width, k, count[tt], m, a, e, wt);
            }
            first = 0;
        }
    }
    free(count);
    free(maps);
    free(tile_of);
    free(row_of);
    return rc;
}

int nnt_moe_gather(nnt_tensor *x, nnt_tensor *w, const nnt_moe_rows *rows, nnt_tensor *xe)
{
    const char *fn = "nnt_moe_gather";
    NNT_TRY(nnt_check_arg(fn, "x", x, NNT_FP32, 1));
    if (w)
        NNT_TRY(nnt_check_arg(fn, "w", w, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "xe", xe, NNT_FP32, 0));
    NNT_TRY(check_maps(fn, x, w, rows, xe));
    NNT_TRY(submit_maps(KIND_GATHER, x, w, rows, xe));
    nnt_tensor_mark_written(xe);
    return NNT_OK;
}

int nnt_moe_scatter_add(nnt_tensor *ye, nnt_tensor *w, const nnt_moe_rows *rows,
                        nnt_tensor *y)
{
    const char *fn = "nnt_moe_scatter_add";
    NNT_TRY(nnt_check_arg(fn, "ye", ye, NNT_FP32, 1));
    if (w)
        NNT_TRY(nnt_check_arg(fn, "w", w, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "y", y, NNT_FP32, 1));
    NNT_TRY(check_maps(fn, y, w, rows, ye));
    return submit_maps(KIND_SCATTER, y, w, rows, ye);
}

int nnt_moe_weight_grad(nnt_tensor *dy, nnt_tensor *ye, const nnt_moe_rows *rows,
                        nnt_tensor *dw)
{
    const char *fn = "nnt_moe_weight_grad";
    NNT_TRY(nnt_check_arg(fn, "dy", dy, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "ye", ye, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "dw", dw, NNT_FP32, 1));
    NNT_TRY(check_maps(fn, dy, dw, rows, ye));
    return submit_maps(KIND_WGRAD, dy, dw, rows, ye);
}

/* ---- the shared expert's sigmoid gate ------------------------------------------------------ */

/* z (B, T, 1), k in one tile, its tokens tiled as act's (B, T, C). */
static int check_gate(const char *fn, nnt_tensor *z, nnt_tensor *act)
{
    if (act->ndim != 3 || z->ndim != 3 || z->shape[2] != 1)
        return nnt_fail(act->ctx, NNT_E_SHAPE, "%s: needs z (B, T, 1) and activations (B, T, "
                        "C)", fn);
    return nnt_check_dims(fn, "z", z, 0, "activation", act, 0, 2);
}

int nnt_moe_shared_add(nnt_tensor *z, nnt_tensor *s, nnt_tensor *y)
{
    const char *fn = "nnt_moe_shared_add";
    NNT_TRY(nnt_check_arg(fn, "z", z, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "s", s, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "y", y, NNT_FP32, 1));
    NNT_TRY(nnt_check_same_layout(fn, "s", s, "y", y));
    NNT_TRY(check_gate(fn, z, y));
    for (int64_t i = 0; i < y->ntiles; i++) {
        int64_t tile[3];
        nnt_tensor_tile_shape_at(y, i, tile);
        NNT_TRY(nnt_insert_moe_shared_add(y->ctx, tile[2], z->tiles[i / y->grid[2]].handle,
                                          s->tiles[i].handle, y->tiles[i].handle));
    }
    return NNT_OK;
}

int nnt_moe_shared_backward(nnt_tensor *z, nnt_tensor *s, nnt_tensor *dy, nnt_tensor *ds,
                            nnt_tensor *dz)
{
    const char *fn = "nnt_moe_shared_backward";
    NNT_TRY(nnt_check_arg(fn, "z", z, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "s", s, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "dy", dy, NNT_FP32, 1));
    NNT_TRY(nnt_check_arg(fn, "ds", ds, NNT_FP32, 0));
    NNT_TRY(nnt_check_arg(fn, "dz", dz, NNT_FP32, 0));
    NNT_TRY(nnt_check_same_layout(fn, "s", s, "dy", dy));
    NNT_TRY(nnt_check_same_layout(fn, "s", s, "ds", ds));
    NNT_TRY(nnt_check_same_layout(fn, "z", z, "dz", dz));
    NNT_TRY(check_gate(fn, z, s));
    /* tile i of s is token tile i / grid[2], channel tile i % grid[2]: for each token tile
     * its channel tiles in order, the first writing dz */
    for (int64_t i = 0; i < s->ntiles; i++) {
        int64_t tile[3], c = i % s->grid[2];
        nnt_tensor_tile_shape_at(s, i, tile);
        starpu_data_handle_t zt = z->tiles[i / s->grid[2]].handle;
        starpu_data_handle_t dzt = dz->tiles[i / s->grid[2]].handle;
        NNT_TRY(nnt_insert_moe_shared_bwd(s->ctx, tile[2], c > 0, zt, s->tiles[i].handle,
                                          dy->tiles[i].handle, ds->tiles[i].handle, dzt));
    }
    nnt_tensor_mark_written(ds);
    nnt_tensor_mark_written(dz);
    return NNT_OK;
}
