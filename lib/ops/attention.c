/* Causal self-attention on tiled (B, NH, T, hd) tensors, flash style: no (T, T) matrix is
 * stored. The kernels need whole head vectors, so when hd is split over tiles the operands
 * are retiled into temporaries with a single hd tile and the results are copied back.
 * Forward, per query tile i (b-tile, h-tile, t-tile): one block task per key tile j <= i
 * (the first starts the running max m, sum l and accumulator o), then a finalize task.
 * Backward: a prep task per query tile (d = rowsum(dout * o)), then one block task per
 * pair (i, j <= i) in a fixed order, accumulating into dq_i, dk_j and dv_j. */
#include "../internal.h"

#include <math.h>

/* ---- argument checks ------------------------------------------------------------------------ */

/* n tensors (the first nread are read, so must have been written); all[0] is q
 * (B, NH, T, hd), all[lse_at] is lse (B, NH, T), the others have q's layout; the tensors
 * from first_out on are outputs and must differ from every other argument. */
static int check_args(const char *fn, int n, nnt_tensor *const *all, const char *const *roles,
                      int nread, int lse_at, int first_out, double scale)
{
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = nnt_check_arg(fn, roles[i], all[i], NNT_FP32, 0);
    for (int i = 0; i < nread && rc == 0; i++)
        rc = nnt_tensor_check_readable(all[i], fn);
    if (rc)
        return rc;
    nnt_tensor *q = all[0];
    if (q->ndim != 4)
        return nnt_fail(q->ctx, NNT_E_SHAPE, "%s: q must have 4 dimensions (B, NH, T, hd), "
                        "not %d", fn, q->ndim);
    if (!isfinite(scale))
        return nnt_fail(q->ctx, NNT_E_INVAL, "%s: scale %g is not finite", fn, scale);
    for (int i = first_out; i < n; i++)
        for (int j = 0; j < i; j++)
            if (all[i] == all[j])
                return nnt_fail(q->ctx, NNT_E_INVAL, "%s: %s and %s are the same tensor", fn,
                                roles[j], roles[i]);
    for (int i = 1; i < n && rc == 0; i++) {
        if (i != lse_at)
            rc = nnt_check_same_layout(fn, "q", q, roles[i], all[i]);
        else if (all[i]->ndim != 3)
            rc = nnt_fail(q->ctx, NNT_E_SHAPE, "%s: %s must have 3 dimensions (B, NH, T), "
                          "not %d", fn, roles[i], all[i]->ndim);
        else
            rc = nnt_check_dims(fn, "q", q, 0, roles[i], all[i], 0, 3);
    }
    return rc;
}

/* ---- whole head vectors ------------------------------------------------------------------- */

static void whole_hd_tile(const nnt_tensor *t, int64_t *tile)
{
    for (int d = 0; d < 3; d++)
        tile[d] = t->tile[d];
    tile[3] = t->shape[3];
}

/* *out = t if hd is one tile, else a retiled copy (a temporary). */
static int whole_hd_in(nnt_tensor *t, nnt_tensor **out)
{
    int64_t tile[4];
    *out = t;
    if (t->grid[3] == 1)
        return NNT_OK;
    whole_hd_tile(t, tile);
    return nnt_retile_temp(t, tile, out);
}

/* *out = t if hd is one tile, else an unwritten temporary with one hd tile. */
static int whole_hd_out(nnt_tensor *t, nnt_tensor **out)
{
    int64_t tile[4];
    *out = t;
    if (t->grid[3] == 1)
        return NNT_OK;
    whole_hd_tile(t, tile);
    return nnt_temp_create(t->ctx, t->dtype, 4, t->shape, tile, out);
}

/* After the tasks on tmp (the stand-in of output dst) were submitted with status rc: mark
 * tmp written and copy it into dst, then release tmp. Returns the new status. */
static int whole_hd_finish(nnt_tensor *tmp, nnt_tensor *dst, int rc)
{
    if (tmp && rc == 0)
        nnt_tensor_mark_written(tmp);
    if (!tmp || tmp == dst)
        return rc;
    if (rc == 0)
        rc = nnt_tensor_copy(tmp, dst);
    nnt_temp_release(tmp);
    return rc;
}

static void whole_hd_drop(nnt_tensor *tmp, nnt_tensor *orig)
{
    if (tmp && tmp != orig)
        nnt_temp_release(tmp);
}

/* Geometry of query / key tile (bi, hi, ti) of a tensor with one hd tile: tile index, slab
 * count nbh, rows, first sequence position. */
struct seq_tile {
    int64_t index, nbh, rows, pos0;
};

static struct seq_tile seq_tile(const nnt_tensor *t, int64_t bi, int64_t hi, int64_t ti)
{
    int64_t shape[4];
    struct seq_tile s;
    s.index = (bi * t->grid[1] + hi) * t->grid[2] + ti;
    nnt_tensor_tile_shape_at(t, s.index, shape);
    s.nbh = shape[0] * shape[1];
    s.rows = shape[2];
    s.pos0 = ti * t->tile[2];
    return s;
}

/* ---- forward ------------------------------------------------------------------------------ */

/* Tasks of query tile (bi, hi, i); q, k, v, o with one hd tile, m, l, lse (B, NH, T). */
static int forward_query_tile(nnt_tensor *const *w, nnt_tensor *m, nnt_tensor *l,
                              nnt_tensor *lse, float scale, int64_t bi, int64_t hi, int64_t i)
{
    nnt_tensor *q = w[0], *k = w[1], *v = w[2], *o = w[3];
    int64_t hd = q->shape[3];
    struct seq_tile qt = seq_tile(q, bi, hi, i);
    /* the lse, m, l tile has the same index: same leading grid, hd grid 1 */
    int rc = 0;
    for (int64_t j = 0; j <= i && rc == 0; j++) {
        struct seq_tile kt = seq_tile(k, bi, hi, j);
        if (kt.pos0 > qt.pos0 + qt.rows - 1)
            break;   /* every key after every query: fully masked */
        starpu_data_handle_t h[6] = {q->tiles[qt.index].handle, k->tiles[kt.index].handle,
                                     v->tiles[kt.index].handle, o->tiles[qt.index].handle,
                                     m->tiles[qt.index].handle, l->tiles[qt.index].handle};
        rc = nnt_insert_attn_fwd_block(q->ctx, qt.nbh, qt.rows, kt.rows, hd, qt.pos0, kt.pos0,
                                       scale, h, j == 0);
    }
    if (rc == 0)
        rc = nnt_insert_attn_fwd_finalize(q->ctx, qt.nbh, qt.rows, hd,
                                          o->tiles[qt.index].handle, m->tiles[qt.index].handle,
                                          l->tiles[qt.index].handle, lse->tiles[qt.index].handle);
    return rc;
}

static int submit_forward(nnt_tensor *const *w, nnt_tensor *lse, float scale)
{
    nnt_tensor *q = w[0], *m = NULL, *l = NULL;
    int rc = nnt_temp_create(q->ctx, NNT_FP32, 3, lse->shape, lse->tile, &m);
    if (rc == 0)
        rc = nnt_temp_create(q->ctx, NNT_FP32, 3, lse->shape, lse->tile, &l);
    for (int64_t bi = 0; bi < q->grid[0] && rc == 0; bi++)
        for (int64_t hi = 0; hi < q->grid[1] && rc == 0; hi++)
            for (int64_t i = 0; i < q->grid[2] && rc == 0; i++)
                rc = forward_query_tile(w, m, l, lse, scale, bi, hi, i);
    nnt_temp_release(m);
    nnt_temp_release(l);
    return rc;
}

int nnt_tensor_attention(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v, double scale,
                         nnt_tensor *o, nnt_tensor *lse)
{
    const char *fn = "nnt_tensor_attention";
    static const char *const roles[5] = {"q", "k", "v", "o", "lse"};
    nnt_tensor *all[5] = {q, k, v, o, lse};
    int rc = check_args(fn, 5, all, roles, 3, 4, 3, scale);
    if (rc)
        return rc;
    nnt_tensor *w[4] = {NULL, NULL, NULL, NULL};   /* q, k, v, o with one hd tile */
    if ((rc = whole_hd_in(q, &w[0])) == 0 && (rc = whole_hd_in(k, &w[1])) == 0 &&
        (rc = whole_hd_in(v, &w[2])) == 0 && (rc = whole_hd_out(o, &w[3])) == 0)
        rc = submit_forward(w, lse, (float)scale);
    if (rc == 0)
        nnt_tensor_mark_written(lse);
    rc = whole_hd_finish(w[3], o, rc);
    for (int i = 0; i < 3; i++)
        whole_hd_drop(w[i], all[i]);
    return rc;
}

/* ---- backward ----------------------------------------------------------------------------- */

/* w: q, k, v, o, lse, dout, dq, dk, dv (one hd tile each; lse (B, NH, T)); d like lse. */
static int submit_backward(nnt_tensor *const *w, nnt_tensor *d, float scale)
{
    nnt_tensor *q = w[0], *k = w[1], *v = w[2], *o = w[3], *lse = w[4], *dout = w[5],
               *dq = w[6], *dk = w[7], *dv = w[8];
    int64_t hd = q->shape[3];
    int rc = 0;
    for (int64_t bi = 0; bi < q->grid[0] && rc == 0; bi++)
        for (int64_t hi = 0; hi < q->grid[1] && rc == 0; hi++)
            for (int64_t i = 0; i < q->grid[2] && rc == 0; i++) {
                struct seq_tile qt = seq_tile(q, bi, hi, i);
                rc = nnt_insert_attn_bwd_prep(q->ctx, qt.nbh, qt.rows, hd,
                                              o->tiles[qt.index].handle,
                                              dout->tiles[qt.index].handle,
                                              d->tiles[qt.index].handle);
            }
    /* pairs (i, j <= i), i then j increasing: dq_i starts at j = 0, dk_j and dv_j at i = j */
    for (int64_t bi = 0; bi < q->grid[0] && rc == 0; bi++)
        for (int64_t hi = 0; hi < q->grid[1] && rc == 0; hi++)
            for (int64_t i = 0; i < q->grid[2] && rc == 0; i++)
                for (int64_t j = 0; j <= i && rc == 0; j++) {
                    struct seq_tile qt = seq_tile(q, bi, hi, i), kt = seq_tile(k, bi, hi, j);
                    int64_t qi = qt.index, kj = kt.index;
                    starpu_data_handle_t h[9] = {
                        q->tiles[qi].handle, k->tiles[kj].handle, v->tiles[kj].handle,
                        dout->tiles[qi].handle, lse->tiles[qi].handle, d->tiles[qi].handle,
                        dq->tiles[qi].handle, dk->tiles[kj].handle, dv->tiles[kj].handle};
                    rc = nnt_insert_attn_bwd_block(q->ctx, qt.nbh, qt.rows, kt.rows, hd,
                                                   qt.pos0, kt.pos0, scale, h, j == 0, i == j);
                }
    return rc;
}

int nnt_tensor_attention_backward(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v, nnt_tensor *o,
                                  nnt_tensor *lse, nnt_tensor *dout, double scale,
                                  nnt_tensor *dq, nnt_tensor *dk, nnt_tensor *dv)
{
    const char *fn = "nnt_tensor_attention_backward";
    static const char *const roles[9] = {"q", "k", "v", "o", "lse", "dout", "dq", "dk", "dv"};
    nnt_tensor *all[9] = {q, k, v, o, lse, dout, dq, dk, dv};
    int rc = check_args(fn, 9, all, roles, 6, 4, 6, scale);
    if (rc)
        return rc;
    nnt_tensor *w[9] = {NULL, NULL, NULL, NULL, lse, NULL, NULL, NULL, NULL}, *d = NULL;
    for (int i = 0; i < 9 && rc == 0; i++)
        if (i != 4)
            rc = i < 6 ? whole_hd_in(all[i], &w[i]) : whole_hd_out(all[i], &w[i]);
    if (rc == 0)
        rc = nnt_temp_create(q->ctx, NNT_FP32, 3, lse->shape, lse->tile, &d);
    if (rc == 0)
        rc = submit_backward(w, d, (float)scale);
    nnt_temp_release(d);
    for (int i = 6; i < 9; i++)
        rc = whole_hd_finish(w[i], all[i], rc);
    for (int i = 0; i < 6; i++)
        if (i != 4)
            whole_hd_drop(w[i], all[i]);
    return rc;
}
