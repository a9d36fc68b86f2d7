/* SPDX-License-Identifier: MIT */
/* Broadcast add over leading dimensions, its reverse (sums over leading dimensions), and the
 * sum of squares of a set of tensors.
 *
 * y (m..., n...) and x (n...) share the tiling of n..., so a tile of y is a contiguous
 * (rows, inner) block whose inner part is exactly the x tile with the same trailing grid
 * coordinates. add_broadcast: one task per y tile. sum_leading: per y tile one task for each
 * x tile above it, submitted in row-major order of the leading tile coordinates with plain
 * read-write access on y, so the sum is accumulated in a fixed order. sumsq: one task per
 * tile into its own one-float partial, summed on the host in double in a fixed order. */
#include "../internal.h"

#include <pthread.h>
#include <stdlib.h>

/* big (m..., n...) and small (n...): distinct, FP32, and small's shape and tiling equal the
 * trailing dims of big's. */
static int check_broadcast(const char *fn, const char *big_role, const nnt_tensor *big,
                           const char *small_role, const nnt_tensor *small)
{
    if (big == small)
        return nnt_fail(big->ctx, NNT_E_INVAL, "%s: %s and %s are the same tensor", fn,
                        small_role, big_role);
    if (small->ndim > big->ndim)
        return nnt_fail(big->ctx, NNT_E_SHAPE, "%s: %s has %d dimensions, more than the %d of %s",
                        fn, small_role, small->ndim, big->ndim, big_role);
    return nnt_check_dims(fn, small_role, small, 0, big_role, big, big->ndim - small->ndim,
                          small->ndim);
}

/* Number of tiles of big over its leading (big.ndim - nsmall) dims. */
static int64_t leading_tiles(const nnt_tensor *big, int nsmall)
{
    return nnt_box_numel(big->ndim - nsmall, big->grid);
}

/* Tile index in big of leading tile k (row-major over the leading grid) above the tile of
 * small whose grid coordinates are small_coord. */
static int64_t big_tile_index(const nnt_tensor *big, int nsmall, int64_t k,
                              const int64_t *small_coord)
{
    int nlead = big->ndim - nsmall;
    int64_t coord[NNT_MAX_DIMS];
    for (int d = nlead - 1; d >= 0; d--) {
        coord[d] = k % big->grid[d];
        k /= big->grid[d];
    }
    for (int d = 0; d < nsmall; d++)
        coord[nlead + d] = small_coord[d];
    return nnt_tensor_tile_index(big, coord);
}

int nnt_tensor_add_broadcast(nnt_tensor *x, nnt_tensor *y)
{
    const char *fn = "nnt_tensor_add_broadcast";
    int rc = nnt_check_arg(fn, "x", x, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "y", y, NNT_FP32, 1);
    if (rc == 0)
        rc = check_broadcast(fn, "y", y, "x", x);
    int64_t x_coord[NNT_MAX_DIMS], nlead = rc ? 0 : leading_tiles(y, x->ndim);
    for (int64_t xi = 0; rc == 0 && xi < x->ntiles; xi++) {
        nnt_tensor_tile_coord(x, xi, x_coord);
        for (int64_t k = 0; rc == 0 && k < nlead; k++) {
            int64_t yi = big_tile_index(y, x->ndim, k, x_coord);
            rc = nnt_insert_add_bcast(y->ctx, x->tiles[xi].handle, y->tiles[yi].handle);
        }
    }
    return rc;
}

/* acc (n...) = sum over m... of x (m..., n...) [+ beta acc]: per acc tile, the x tiles
 * above it in a fixed order, the first one applying beta. */
static int sum_leading_tiles(nnt_tensor *x, float beta, nnt_tensor *acc)
{
    int rc = NNT_OK;
    int64_t coord[NNT_MAX_DIMS], nlead = leading_tiles(x, acc->ndim);
    for (int64_t yi = 0; rc == 0 && yi < acc->ntiles; yi++) {
        nnt_tensor_tile_coord(acc, yi, coord);
        for (int64_t k = 0; rc == 0 && k < nlead; k++) {
            int64_t xi = big_tile_index(x, acc->ndim, k, coord);
            rc = nnt_insert_sum_outer(acc->ctx, x->tiles[xi].handle, acc->tiles[yi].handle,
                                      k == 0, beta);
        }
    }
    return rc;
}

/* y = alpha sums + beta y with alpha != 1: the sums go to a temporary with y's layout,
 * then one axpby task per y tile. */
static int sum_leading_scaled(double alpha, nnt_tensor *x, double beta, nnt_tensor *y)
{
    nnt_tensor *sums;   // (n...) in y's tiling
    int rc = nnt_temp_create(y->ctx, NNT_FP32, y->ndim, y->shape, y->tile, &sums);
    if (rc)
        return rc;
    rc = sum_leading_tiles(x, 0.0f, sums);
    for (int64_t i = 0; rc == 0 && i < y->ntiles; i++)
        rc = nnt_insert_axpby(y->ctx, (float)alpha, sums->tiles[i].handle, (float)beta,
                              y->tiles[i].handle);
    nnt_temp_release(sums);
    return rc;
}

int nnt_tensor_sum_leading(double alpha, nnt_tensor *x, double beta, nnt_tensor *y)
{
    const char *fn = "nnt_tensor_sum_leading";
    int rc = nnt_check_arg(fn, "x", x, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "y", y, NNT_FP32, beta != 0.0);
    if (rc == 0)
        rc = check_broadcast(fn, "x", x, "y", y);
    if (rc)
        return rc;
    if ((float)alpha == 1.0f)
        rc = sum_leading_tiles(x, (float)beta, y);
    else
        rc = sum_leading_scaled(alpha, x, beta, y);
    if (rc == 0)
        nnt_tensor_mark_written(y);
    return rc;
}

/* ---- sum of squares ------------------------------------------------------------------- */

static int check_sumsq_args(const char *fn, int n, nnt_tensor *const *tensors,
                            const double *sumsq, int64_t *ntiles)
{
    if (!sumsq)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: sumsq is NULL", fn);
    if (n < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: n = %d is negative", fn, n);
    if (n > 0 && !tensors)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: tensors is NULL (n = %d)", fn, n);
    *ntiles = 0;
    for (int t = 0; t < n; t++) {
        if (!tensors[t])
            return nnt_fail(NULL, NNT_E_INVAL, "%s: tensors[%d] is NULL", fn, t);
        int rc = nnt_tensor_check_readable(tensors[t], fn);
        if (rc == 0)
            rc = nnt_check_dtype(fn, "every tensor", tensors[t], NNT_FP32);
        if (rc)
            return rc;
        *ntiles += tensors[t]->ntiles;
    }
    return NNT_OK;
}

/* One partial per tile of x: register a one-float variable in partial[*count] on, submit
 * its task. */
int nnt_sumsq_submit(nnt_tensor *x, starpu_data_handle_t *partial, int *owner, int64_t *count)
{
    for (int64_t i = 0; i < x->ntiles; i++) {
        starpu_data_handle_t *h = &partial[(*count)++];
        starpu_variable_data_register(h, -1, 0, sizeof(float));
        owner[*count - 1] = x->tiles[i].owner;   /* computed where the tile is */
        nnt_mpi_register(x->ctx, *h, x->tiles[i].owner);
        NNT_TRY(nnt_insert_sumsq(x->ctx, x->tiles[i].handle, *h));
    }
    return NNT_OK;
}

/* The partials on their way to RAM: each acquire's callback copies its value and releases
 * it; the thread gathering them sleeps until the last has come. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int64_t left;                    /* partials not yet copied */
    starpu_data_handle_t *partial;   // (count)
    float *value;                    // (count)
} sumsq_gather;

typedef struct {
    sumsq_gather *g;
    int64_t i;
} sumsq_slot;

static void partial_arrived(void *arg)
{
    const sumsq_slot *slot = arg;
    sumsq_gather *g = slot->g;
    starpu_data_handle_t h = g->partial[slot->i];
    void *iface = starpu_data_get_interface_on_node(h, STARPU_MAIN_RAM);
    g->value[slot->i] = *(const float *)STARPU_VARIABLE_GET_PTR(iface);
    starpu_data_release(h);
    pthread_mutex_lock(&g->lock);
    if (--g->left == 0)
        pthread_cond_signal(&g->done);
    pthread_mutex_unlock(&g->lock);
}

/* Ask for every partial at once, wait for them all, then add them in order in double (under
 * MPI every rank receives every partial first: the same sum everywhere). One wait, not one a
 * partial: on an H200 the CUDA worker answered 202 acquires in a row 6 ms apart in some steps
 * (1.1-1.3 s of an idle GPU between the backward and the optimizer step, bench/RESULTS-gpu.md,
 * 2026-11-29). */
int nnt_sumsq_gather(nnt_ctx *ctx, int64_t count, starpu_data_handle_t *partial,
                     const int *owner, double *sum)
{
    *sum = 0.0;
    if (count == 0)
        return NNT_OK;
    for (int64_t i = 0; ctx->mpi && i < count; i++)
        nnt_mpi_share(ctx, partial[i], owner[i]);
    sumsq_gather g = {.left = count, .partial = partial};
    g.value = malloc((size_t)count * sizeof *g.value);
    sumsq_slot *slots = malloc((size_t)count * sizeof *slots);
    if (!g.value || !slots) {
        free(g.value);
        free(slots);
        return nnt_fail(ctx, NNT_E_NOMEM, "nnt_tensors_sumsq: out of host memory");
    }
    pthread_mutex_init(&g.lock, NULL);
    pthread_cond_init(&g.done, NULL);
    int64_t asked = 0;
    for (; asked < count; asked++) {
        slots[asked] = (sumsq_slot){&g, asked};
        if (starpu_data_acquire_cb(partial[asked], STARPU_R, partial_arrived, &slots[asked]))
            break;
    }
    pthread_mutex_lock(&g.lock);
    g.left -= count - asked;   /* the ones never asked for will not come */
    while (g.left > 0)
        pthread_cond_wait(&g.done, &g.lock);
    pthread_mutex_unlock(&g.lock);
    pthread_cond_destroy(&g.done);
    pthread_mutex_destroy(&g.lock);
    for (int64_t i = 0; i < asked; i++)
        *sum += g.value[i];
    free(g.value);
    free(slots);
    if (asked < count)
        return nnt_fail(ctx, NNT_E_RUNTIME, "nnt_tensors_sumsq: cannot acquire partial %lld",
                        (long long)asked);
    return NNT_OK;
}

int nnt_tensors_sumsq(int n, nnt_tensor *const *tensors, double *sumsq)
{
    const char *fn = "nnt_tensors_sumsq";
    int64_t ntiles = 0, nregistered = 0;
    int rc = check_sumsq_args(fn, n, tensors, sumsq, &ntiles);
    if (rc)
        return rc;
    if (ntiles == 0) {
        *sumsq = 0.0;
        return NNT_OK;
    }
    nnt_ctx *ctx = tensors[0]->ctx;
    starpu_data_handle_t *partial = malloc((size_t)ntiles * sizeof *partial);   // (ntiles)
    int *owner = malloc((size_t)ntiles * sizeof *owner);                        // (ntiles)
    if (!partial || !owner) {
        free(partial);
        free(owner);
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of host memory", fn);
    }
    for (int t = 0; rc == 0 && t < n; t++)
        rc = nnt_sumsq_submit(tensors[t], partial, owner, &nregistered);
    double sum = 0.0;
    if (rc == 0)
        rc = nnt_sumsq_gather(ctx, ntiles, partial, owner, &sum);
    for (int64_t i = 0; i < nregistered; i++)
        starpu_data_unregister(partial[i]);
    free(partial);
    free(owner);
    if (rc == 0)
        *sumsq = sum;
    return rc;
}

/* ---- DoRA's per-feature products ------------------------------------------------------------
 * A feature vector h (n...) sits on the trailing dims of a tensor x (m..., n...) (the outputs'
 * features of rows of activations) or, by_row, on its leading ones (x (n..., k...): the rows
 * of a weight). */

/* x's tile index i and the index of the tile of h above it (h on trailing or leading dims). */
static int64_t feature_tile(const nnt_tensor *x, const nnt_tensor *h, int leading, int64_t xi)
{
    int64_t coord[NNT_MAX_DIMS];
    nnt_tensor_tile_coord(x, xi, coord);
    return nnt_tensor_tile_index(h, leading ? coord : coord + x->ndim - h->ndim);
}

/* h's dims and tiles those of x's leading (leading) or trailing dims; x, h distinct FP32 */
static int check_features(const char *fn, const char *x_role, const nnt_tensor *x,
                          const char *h_role, const nnt_tensor *h, int leading)
{
    if (!leading)
        return check_broadcast(fn, x_role, x, h_role, h);
    if (x == h)
        return nnt_fail(x->ctx, NNT_E_INVAL, "%s: %s and %s are the same tensor", fn, h_role,
                        x_role);
    if (h->ndim >= x->ndim)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: %s has %d dimensions, not fewer than the %d "
                        "of %s", fn, h_role, h->ndim, x->ndim, x_role);
    return nnt_check_dims(fn, h_role, h, 0, x_role, x, 0, h->ndim);
}

int nnt_tensor_mul_broadcast(nnt_tensor *x, nnt_tensor *h, double c, int by_row, double beta,
                             nnt_tensor *z)
{
    const char *fn = "nnt_tensor_mul_broadcast";
    int rc = nnt_check_arg(fn, "x", x, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "h", h, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "z", z, NNT_FP32, beta != 0.0);
    if (rc == 0 && beta != 0.0 && beta != 1.0)
        rc = nnt_fail(x->ctx, NNT_E_INVAL, "%s: beta %g is neither 0 nor 1", fn, beta);
    if (rc == 0 && x != z)
        rc = nnt_check_same_layout(fn, "x", x, "z", z);
    if (rc == 0)
        rc = check_features(fn, "x", x, "h", h, by_row);
    for (int64_t i = 0; rc == 0 && i < x->ntiles; i++)
        rc = nnt_insert_mul_bcast(x->ctx, x->tiles[i].handle,
                                  h->tiles[feature_tile(x, h, by_row, i)].handle, (float)c,
                                  by_row, beta != 0.0, z->tiles[i].handle);
    if (rc == 0)
        nnt_tensor_mark_written(z);
    return rc;
}

/* acc's tile ai and, for its k-th x tile (row-major over the other dims' grid), that tile */
static int64_t reduced_tile(const nnt_tensor *x, const nnt_tensor *acc, int leading, int64_t ai,
                            int64_t k)
{
    int64_t coord[NNT_MAX_DIMS], acc_coord[NNT_MAX_DIMS];
    nnt_tensor_tile_coord(acc, ai, acc_coord);
    if (!leading)   /* acc on the trailing dims: k runs over the leading grid */
        return big_tile_index(x, acc->ndim, k, acc_coord);
    for (int d = x->ndim - 1; d >= acc->ndim; d--) {
        coord[d] = k % x->grid[d];
        k /= x->grid[d];
    }
    for (int d = 0; d < acc->ndim; d++)
        coord[d] = acc_coord[d];
    return nnt_tensor_tile_index(x, coord);
}

/* acc = beta acc + sums of x y over the dims acc has not: the trailing ones (leading: acc on
 * x's leading dims) or the leading ones, times h (or not) per element of acc; per acc tile
 * its x tiles in a fixed order, the first applying beta. */
static int dot_reduce(const char *fn, nnt_tensor *x, nnt_tensor *y, nnt_tensor *h, double beta,
                      nnt_tensor *acc, int acc_leading)
{
    int bf16 = acc_leading && x->dtype == NNT_BF16;
    int nf4 = acc_leading && x == y && x->dtype == NNT_NF4 && !h;   /* the squares */
    int rc = nnt_check_arg(fn, "x", x, bf16 ? NNT_BF16 : nf4 ? NNT_NF4 : NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "y", y, x->dtype, 1);
    if (rc == 0 && h)
        rc = nnt_check_arg(fn, "h", h, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "acc", acc, NNT_FP32, beta != 0.0);
    if (rc == 0 && x != y)
        rc = nnt_check_same_layout(fn, "x", x, "y", y);
    if (rc == 0)
        rc = check_features(fn, "x", x, "acc", acc, acc_leading);
    if (rc == 0 && h)
        rc = nnt_check_same_layout(fn, "h", h, "acc", acc);
    int64_t per = rc ? 0 : x->ntiles / acc->ntiles;   /* x tiles above each acc tile */
    for (int64_t ai = 0; rc == 0 && ai < acc->ntiles; ai++)
        for (int64_t k = 0; rc == 0 && k < per; k++) {
            int64_t xi = reduced_tile(x, acc, acc_leading, ai, k);
            starpu_data_handle_t xh = x->tiles[xi].handle, yh = y->tiles[xi].handle;
            rc = nf4 ? nnt_insert_dot_rows_nf4(x->ctx, xh, acc->tiles[ai].handle, k == 0,
                                               (float)beta)
                 : acc_leading
                     ? nnt_insert_dot_rows(x->ctx, bf16, xh, yh, acc->tiles[ai].handle, k == 0,
                                           (float)beta)
                     : nnt_insert_dot_cols(x->ctx, xh, yh, h ? h->tiles[ai].handle : NULL,
                                           acc->tiles[ai].handle, k == 0, (float)beta);
        }
    if (rc == 0)
        nnt_tensor_mark_written(acc);
    return rc;
}

int nnt_tensor_dot_trailing(nnt_tensor *x, nnt_tensor *y, double beta, nnt_tensor *acc)
{
    return dot_reduce("nnt_tensor_dot_trailing", x, y, NULL, beta, acc, 1);
}

int nnt_tensor_dot_leading(nnt_tensor *x, nnt_tensor *y, nnt_tensor *h, double beta,
                           nnt_tensor *acc)
{
    return dot_reduce("nnt_tensor_dot_leading", x, y, h, beta, acc, 0);
}

int nnt_tensor_rsqrt_mul(nnt_tensor *m, nnt_tensor *n2, nnt_tensor *out)
{
    const char *fn = "nnt_tensor_rsqrt_mul";
    int rc = m ? nnt_check_arg(fn, "m", m, NNT_FP32, 1) : NNT_OK;
    if (rc == 0)
        rc = nnt_check_arg(fn, "n2", n2, NNT_FP32, 1);
    if (rc == 0)
        rc = nnt_check_arg(fn, "out", out, NNT_FP32, 0);
    if (rc == 0 && m)
        rc = nnt_check_same_layout(fn, "m", m, "out", out);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "n2", n2, "out", out);
    for (int64_t i = 0; rc == 0 && i < out->ntiles; i++)
        rc = nnt_insert_rsqrt_mul(out->ctx, m ? m->tiles[i].handle : NULL, n2->tiles[i].handle,
                                  out->tiles[i].handle);
    if (rc == 0)
        nnt_tensor_mark_written(out);
    return rc;
}
