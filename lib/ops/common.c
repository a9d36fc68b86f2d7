/* SPDX-License-Identifier: MIT */
/* Helpers shared by the tensor operations: tile geometry, layout checks, temporaries. */
#include "../internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int64_t nnt_box_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

void nnt_row_major_strides(int ndim, const int64_t *shape, int64_t *stride)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = s;
        s *= shape[d];
    }
}

int64_t nnt_tensor_tile_index(const nnt_tensor *t, const int64_t *coord)
{
    int64_t i = 0;
    for (int d = 0; d < t->ndim; d++)
        i = i * t->grid[d] + coord[d];
    return i;
}

void nnt_tensor_tile_shape_at(const nnt_tensor *t, int64_t i, int64_t *shape)
{
    int64_t coord[NNT_MAX_DIMS], origin[NNT_MAX_DIMS];
    nnt_tensor_tile_coord(t, i, coord);
    nnt_tensor_tile_box(t, coord, origin, shape);
}

int64_t nnt_tensor_bytes(const nnt_tensor *t)
{
    return nnt_dtype_bytes(t->dtype, nnt_box_numel(t->ndim, t->shape));
}

int64_t nnt_tensor_tile_bytes(const nnt_tensor *t, int64_t i)
{
    int64_t shape[NNT_MAX_DIMS];
    nnt_tensor_tile_shape_at(t, i, shape);
    return nnt_dtype_bytes(t->dtype, nnt_box_numel(t->ndim, shape));
}

/* "(4, 5, 6) in tiles of (2, 5, 3)" into buf. */
static const char *layout_str(const nnt_tensor *t, char *buf, size_t size)
{
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        const int64_t *v = pass ? t->tile : t->shape;
        n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s(", pass ? " in tiles of " : "");
        for (int d = 0; d < t->ndim; d++)
            n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%lld", d ? ", " : "",
                                  (long long)v[d]);
        n += (size_t)snprintf(buf + n, n < size ? size - n : 0, ")");
    }
    return buf;
}

int nnt_same_layout(const nnt_tensor *a, const nnt_tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || a->tile[d] != b->tile[d])
            return 0;
    return 1;
}

int nnt_check_same_layout(const char *fn, const char *role_a, const nnt_tensor *a,
                          const char *role_b, const nnt_tensor *b)
{
    int rc = nnt_tensor_check(a, fn);
    if (rc == 0)
        rc = nnt_tensor_check(b, fn);
    if (rc)
        return rc;
    if (a->ndim != b->ndim)
        return nnt_fail(a->ctx, NNT_E_SHAPE, "%s: %s has %d dimensions, %s has %d", fn, role_a,
                        a->ndim, role_b, b->ndim);
    return nnt_check_dims(fn, role_a, a, 0, role_b, b, 0, a->ndim);
}

const char *nnt_dtype_name(nnt_dtype dtype)
{
    switch (dtype) {
    case NNT_FP32:
        return "NNT_FP32";
    case NNT_INT32:
        return "NNT_INT32";
    case NNT_BF16:
        return "NNT_BF16";
    case NNT_FP16:
        return "NNT_FP16";
    case NNT_NF4:
        return "NNT_NF4";
    default:
        return "an unknown dtype";
    }
}

int nnt_check_dtype(const char *fn, const char *role, const nnt_tensor *t, nnt_dtype dtype)
{
    if (t->dtype == dtype)
        return NNT_OK;
    return nnt_fail(t->ctx, NNT_E_SHAPE, "%s: %s must be %s, not %s", fn, role,
                    nnt_dtype_name(dtype), nnt_dtype_name(t->dtype));
}

int nnt_check_arg(const char *fn, const char *role, const nnt_tensor *t, nnt_dtype dtype,
                  int must_read)
{
    if (!t)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: %s is NULL", fn, role);
    int rc = must_read ? nnt_tensor_check_readable(t, fn) : nnt_tensor_check(t, fn);
    return rc ? rc : nnt_check_dtype(fn, role, t, dtype);
}

int nnt_check_dims(const char *fn, const char *role_a, const nnt_tensor *a, int a0,
                   const char *role_b, const nnt_tensor *b, int b0, int n)
{
    char la[256], lb[256];
    if (a0 < 0 || b0 < 0 || a0 + n > a->ndim || b0 + n > b->ndim)
        return nnt_fail(a->ctx, NNT_E_SHAPE, "%s: %s %s and %s %s have too few dimensions", fn,
                        role_a, layout_str(a, la, sizeof la), role_b, layout_str(b, lb, sizeof lb));
    for (int d = 0; d < n; d++) {
        if (a->shape[a0 + d] != b->shape[b0 + d])
            return nnt_fail(a->ctx, NNT_E_SHAPE, "%s: dimension %d of %s %s differs from "
                            "dimension %d of %s %s", fn, a0 + d, role_a,
                            layout_str(a, la, sizeof la), b0 + d, role_b,
                            layout_str(b, lb, sizeof lb));
        if (a->tile[a0 + d] != b->tile[b0 + d])
            return nnt_fail(a->ctx, NNT_E_SHAPE, "%s: the tiling of dimension %d of %s %s "
                            "differs from dimension %d of %s %s (retile with nnt_tensor_copy)",
                            fn, a0 + d, role_a, layout_str(a, la, sizeof la), b0 + d, role_b,
                            layout_str(b, lb, sizeof lb));
    }
    return NNT_OK;
}

int nnt_temp_create(nnt_ctx *ctx, nnt_dtype dtype, int ndim, const int64_t *shape,
                    const int64_t *tile, nnt_tensor **out)
{
    return nnt_tensor_create(ctx, dtype, ndim, shape, tile, out);
}

void nnt_temp_release(nnt_tensor *t)
{
    if (!t)
        return;
    if (t->ctx) {
        nnt_gemm_kept_retire(t);   /* B's packs kept by products that read t (recomputed
                                      activations) */
        nnt_ctx_remove_tensor(t->ctx, t);
        for (int64_t i = 0; i < t->ntiles; i++)
            starpu_data_unregister_submit(t->tiles[i].handle);
    }
    nnt_tensor_copy_unlink(t);
    free(t->tiles);
    free(t->ids_host);
    t->magic = 0;
    free(t);
}

int nnt_check_adam_hparams(const char *fn, double lr, double beta1, double beta2, double eps)
{
    int rc = nnt_check_range(fn, "lr", lr, 0, 0, INFINITY, 0);
    if (rc == 0)
        rc = nnt_check_range(fn, "beta1", beta1, 0, 0, 1, 0);
    if (rc == 0)
        rc = nnt_check_range(fn, "beta2", beta2, 0, 0, 1, 0);
    if (rc == 0)
        rc = nnt_check_range(fn, "eps", eps, 0, 1, INFINITY, 0);
    return rc;
}

int nnt_check_range(const char *fn, const char *name, double value, double lo, int strict_lo,
                    double hi, int closed_hi)
{
    int ok = isfinite(value) && (strict_lo ? value > lo : value >= lo) &&
             (closed_hi ? value <= hi : value < hi);
    if (ok)
        return NNT_OK;
    return nnt_fail(NULL, NNT_E_INVAL, "%s: %s = %g is not in %c%g, %g%c", fn, name, value,
                    strict_lo ? '(' : '[', lo, hi, closed_hi ? ']' : ')');
}

/* ---- ops whose kernels need the last dimension whole (LayerNorm, RMSNorm, attention) ----- */

int nnt_check_row_vector(const char *fn, const char *role, const nnt_tensor *vec,
                         const nnt_tensor *x)
{
    int64_t c = x->shape[x->ndim - 1];
    if (vec->ndim != 1 || vec->shape[0] != c)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: %s must have shape (%lld), the last "
                        "dimension of x", fn, role, (long long)c);
    return NNT_OK;
}

int nnt_check_row_stat(const char *fn, const char *role, const nnt_tensor *stat,
                       const nnt_tensor *x)
{
    if (stat->ndim != x->ndim - 1)
        return nnt_fail(x->ctx, NNT_E_SHAPE, "%s: %s has %d dimensions; it must have the %d "
                        "leading dimensions of x", fn, role, stat->ndim, x->ndim - 1);
    return nnt_check_dims(fn, "x", x, 0, role, stat, 0, x->ndim - 1);
}

/* Tile shape of t with the last dimension whole. */
static void whole_last_tile(const nnt_tensor *t, int64_t *tile)
{
    for (int d = 0; d < t->ndim; d++)
        tile[d] = t->tile[d];
    tile[t->ndim - 1] = t->shape[t->ndim - 1];
}

int nnt_whole_last_in(nnt_tensor *t, nnt_tensor **out)
{
    int64_t tile[NNT_MAX_DIMS];
    *out = t;
    if (t->grid[t->ndim - 1] == 1)
        return NNT_OK;
    whole_last_tile(t, tile);
    return nnt_retile_temp(t, tile, out);
}

int nnt_whole_last_out(nnt_tensor *t, nnt_tensor **out)
{
    int64_t tile[NNT_MAX_DIMS];
    *out = t;
    if (t->grid[t->ndim - 1] == 1)
        return NNT_OK;
    whole_last_tile(t, tile);
    return nnt_temp_create(t->ctx, t->dtype, t->ndim, t->shape, tile, out);
}

int nnt_whole_last_finish(nnt_tensor *tmp, nnt_tensor *dst, int rc)
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

void nnt_whole_last_drop(nnt_tensor *tmp, nnt_tensor *orig)
{
    if (tmp && tmp != orig)
        nnt_temp_release(tmp);
}
