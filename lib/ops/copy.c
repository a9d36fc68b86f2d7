/* SPDX-License-Identifier: MIT */
/* nnt_tensor_copy and nnt_tensor_permute: every destination tile is filled by one task per
 * chunk of the source tiles it overlaps, each overlap one strided box. Any tilings.
 * nnt_tensor_convert: float <-> bfloat16, one task per tile (equal tilings). */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>

/* Source tiles per task; more overlaps are split into several tasks on the same tile. */
#define SRC_PER_TASK 32

/* The box where src tile (src_origin, src_shape) overlaps the destination tile, whose
 * extent in source coordinates is [lo, hi). Destination dim d is source dim perm[d]. */
static void overlap_box(int ndim, const int *perm, const int64_t *lo, const int64_t *src_origin,
                        const int64_t *src_shape, const int64_t *dst_origin,
                        const int64_t *dst_stride, const int64_t *hi, nnt_copy_box *box)
{
    int64_t src_stride[NNT_MAX_DIMS], ov_lo[NNT_MAX_DIMS], ov_len[NNT_MAX_DIMS];
    nnt_row_major_strides(ndim, src_shape, src_stride);
    box->src_offset = 0;
    for (int e = 0; e < ndim; e++) {
        int64_t a = lo[e] > src_origin[e] ? lo[e] : src_origin[e];
        int64_t b = hi[e] < src_origin[e] + src_shape[e] ? hi[e] : src_origin[e] + src_shape[e];
        ov_lo[e] = a;
        ov_len[e] = b - a;
        box->src_offset += (a - src_origin[e]) * src_stride[e];
    }
    box->dst_offset = 0;
    memset(box->shape + ndim, 0, sizeof box->shape - (size_t)ndim * sizeof box->shape[0]);
    for (int d = 0; d < ndim; d++) {
        int e = perm[d];
        box->shape[d] = ov_len[e];
        box->src_stride[d] = src_stride[e];
        box->dst_stride[d] = dst_stride[d];
        box->dst_offset += (ov_lo[e] - dst_origin[d]) * dst_stride[d];
    }
}

/* Submit the tasks that fill destination tile i of dst. */
static int fill_dst_tile(nnt_tensor *src, const int *perm, nnt_tensor *dst, int64_t i,
                         nnt_copy_box *boxes, starpu_data_handle_t *handles)
{
    int nd = src->ndim;
    int64_t coord[NNT_MAX_DIMS], dst_origin[NNT_MAX_DIMS], dst_shape[NNT_MAX_DIMS];
    int64_t dst_stride[NNT_MAX_DIMS], lo[NNT_MAX_DIMS], hi[NNT_MAX_DIMS];
    int64_t first[NNT_MAX_DIMS], last[NNT_MAX_DIMS], sc[NNT_MAX_DIMS];
    nnt_tensor_tile_coord(dst, i, coord);
    nnt_tensor_tile_box(dst, coord, dst_origin, dst_shape);
    nnt_row_major_strides(nd, dst_shape, dst_stride);
    for (int d = 0; d < nd; d++) {           /* the destination tile in source coordinates */
        int e = perm[d];
        lo[e] = dst_origin[d];
        hi[e] = dst_origin[d] + dst_shape[d];
    }
    for (int e = 0; e < nd; e++) {           /* the source tiles it overlaps */
        first[e] = lo[e] / src->tile[e];
        last[e] = (hi[e] - 1) / src->tile[e];
        sc[e] = first[e];
    }
    int n = 0, rc = 0, ntasks = 0;
    for (;;) {
        int64_t s = nnt_tensor_tile_index(src, sc), s_origin[NNT_MAX_DIMS], s_shape[NNT_MAX_DIMS];
        nnt_tensor_tile_box(src, sc, s_origin, s_shape);
        overlap_box(nd, perm, lo, s_origin, s_shape, dst_origin, dst_stride, hi, &boxes[n]);
        boxes[n].src = n;
        handles[n++] = src->tiles[s].handle;
        int e = nd - 1;                        /* next source tile (odometer) */
        while (e >= 0 && ++sc[e] > last[e])
            sc[e] = first[e], e--;
        int done = e < 0;
        if (n == SRC_PER_TASK || done) {
            rc = nnt_insert_copy(dst->ctx, dst->tiles[i].handle, ntasks ? STARPU_RW : STARPU_W,
                                 n, handles, nd, dst->elsize, n, boxes);
            ntasks++;
            n = 0;
        }
        if (done || rc)
            return rc;
    }
}

static int permute_copy(nnt_tensor *src, const int *perm, nnt_tensor *dst, const char *fn)
{
    int rc = nnt_tensor_check_readable(src, fn);
    if (rc == 0)
        rc = nnt_tensor_check(dst, fn);
    if (rc)
        return rc;
    if (src == dst)
        return nnt_fail(src->ctx, NNT_E_INVAL, "%s: source and destination are the same tensor", fn);
    if (src->dtype == NNT_NF4 || dst->dtype == NNT_NF4)
        return nnt_fail(src->ctx, NNT_E_UNSUPPORTED, "%s: NNT_NF4 tensors are not copied (a "
                        "copy would cut their blocks); nnt_tensor_convert dequantizes one", fn);
    NNT_TRY(nnt_tensor_count_first_write(dst, fn));
    if (src->dtype != dst->dtype)
        return nnt_fail(src->ctx, NNT_E_SHAPE, "%s: source and destination dtypes differ", fn);
    if (src->ndim != dst->ndim)
        return nnt_fail(src->ctx, NNT_E_SHAPE, "%s: source has %d dimensions, destination %d",
                        fn, src->ndim, dst->ndim);
    for (int d = 0; d < dst->ndim; d++)
        if (dst->shape[d] != src->shape[perm[d]])
            return nnt_fail(src->ctx, NNT_E_SHAPE, "%s: destination dimension %d has size %lld, "
                            "source dimension %d has %lld", fn, d, (long long)dst->shape[d],
                            perm[d], (long long)src->shape[perm[d]]);
    nnt_copy_box *boxes = malloc(SRC_PER_TASK * sizeof *boxes);
    starpu_data_handle_t *handles = malloc(SRC_PER_TASK * sizeof *handles);
    if (!boxes || !handles)
        rc = nnt_fail(src->ctx, NNT_E_NOMEM, "%s: out of host memory", fn);
    for (int64_t i = 0; i < dst->ntiles && rc == 0; i++)
        rc = fill_dst_tile(src, perm, dst, i, boxes, handles);
    free(boxes);
    free(handles);
    if (rc == 0)
        nnt_tensor_mark_written(dst);
    int identity = 1;
    for (int d = 0; d < dst->ndim; d++)
        identity = identity && perm[d] == d;
    if (rc == 0 && identity)   /* values known on the host stay known */
        nnt_tensor_copy_known_ids(src, dst);
    return rc;
}

int nnt_tensor_permute(nnt_tensor *src, const int *perm, nnt_tensor *dst)
{
    const char *fn = "nnt_tensor_permute";
    int rc = nnt_tensor_check(src, fn);
    if (rc)
        return rc;
    if (!perm)
        return nnt_fail(src->ctx, NNT_E_INVAL, "%s: perm is NULL", fn);
    int seen[NNT_MAX_DIMS] = {0};
    for (int d = 0; d < src->ndim; d++) {
        if (perm[d] < 0 || perm[d] >= src->ndim || seen[perm[d]]++)
            return nnt_fail(src->ctx, NNT_E_INVAL, "%s: perm is not a permutation of 0..%d "
                            "(perm[%d] = %d)", fn, src->ndim - 1, d, perm[d]);
    }
    return permute_copy(src, perm, dst, fn);
}

int nnt_tensor_copy(nnt_tensor *src, nnt_tensor *dst)
{
    static const int identity[NNT_MAX_DIMS] = {0, 1, 2, 3, 4, 5, 6, 7};
    return permute_copy(src, identity, dst, "nnt_tensor_copy");
}

int nnt_tensor_convert(nnt_tensor *src, nnt_tensor *dst)
{
    return nnt_tensor_convert_after(src, dst, NULL);
}

int nnt_tensor_convert_after(nnt_tensor *src, nnt_tensor *dst, starpu_data_handle_t after)
{
    const char *fn = "nnt_tensor_convert";
    int rc = nnt_check_arg(fn, "src", src, src ? src->dtype : NNT_FP32, 1);
    if (rc == 0 && !dst)
        rc = nnt_fail(src->ctx, NNT_E_INVAL, "%s: dst is NULL", fn);
    if (rc == 0)
        rc = nnt_check_same_layout(fn, "src", src, "dst", dst);
    if (rc)
        return rc;
    if (src->dtype == dst->dtype && src->dtype != NNT_NF4)
        return nnt_tensor_copy(src, dst);
    int floats = (src->dtype == NNT_FP32 || src->dtype == NNT_BF16) +
                 (dst->dtype == NNT_FP32 || dst->dtype == NNT_BF16);
    int nf4 = (src->dtype == NNT_NF4) + (dst->dtype == NNT_NF4);
    if (!(floats == 2 || (floats == 1 && nf4 == 1)))
        return nnt_fail(src->ctx, NNT_E_SHAPE, "%s: from %s to %s: only between NNT_FP32 and "
                        "NNT_BF16, from either to NNT_NF4 (quantized) and back (dequantized), "
                        "or between equal dtypes but NNT_NF4", fn, nnt_dtype_name(src->dtype),
                        nnt_dtype_name(dst->dtype));
    if (src == dst)
        return nnt_fail(src->ctx, NNT_E_INVAL, "%s: source and destination are the same tensor",
                        fn);
    NNT_TRY(nnt_tensor_count_first_write(dst, fn));
    int64_t shape[NNT_MAX_DIMS];
    for (int64_t i = 0; i < src->ntiles && rc == 0; i++) {
        nnt_tensor_tile_shape_at(src, i, shape);
        rc = nnt_insert_convert(src->ctx, src->dtype, dst->dtype, nnt_box_numel(src->ndim, shape),
                                src->tiles[i].handle, dst->tiles[i].handle,
                                src->dtype == NNT_NF4 ? after : NULL);
    }
    if (rc == 0)
        nnt_tensor_mark_written(dst);
    return rc;
}

int nnt_tensor_bf16_exact(nnt_tensor *t, int *exact)
{
    *exact = 0;
    if (t->dtype != NNT_FP32 || !t->written || (t->ctx->mpi && t->ctx->nranks > 1))
        return NNT_OK;
    nnt_tensor *counts = NULL;   // (ntiles) int32: each tile's values that bf16 cannot hold
    int64_t shape[1] = {t->ntiles}, tile[1] = {1};
    NNT_TRY(nnt_temp_create(t->ctx, NNT_INT32, 1, shape, tile, &counts));
    int rc = NNT_OK;
    for (int64_t i = 0; i < t->ntiles && rc == 0; i++)
        rc = nnt_insert_bf16_inexact(t->ctx, t->tiles[i].handle, counts->tiles[i].handle);
    int32_t *host = rc ? NULL : malloc((size_t)t->ntiles * sizeof *host);
    if (rc == 0 && !host)
        rc = nnt_fail(t->ctx, NNT_E_NOMEM, "nnt: out of memory checking a tensor's values");
    if (rc == 0) {
        nnt_tensor_mark_written(counts);
        rc = nnt_tensor_copy_to_host(counts, host, (size_t)t->ntiles * sizeof *host);
    }
    int64_t inexact = 0;
    for (int64_t i = 0; rc == 0 && i < t->ntiles; i++)
        inexact += host[i];
    *exact = rc == 0 && inexact == 0;
    free(host);
    nnt_temp_release(counts);
    return rc;
}

int nnt_retile_temp(nnt_tensor *src, const int64_t *tile, nnt_tensor **out)
{
    int rc = nnt_temp_create(src->ctx, src->dtype, src->ndim, src->shape, tile, out);
    if (rc == 0 && (rc = nnt_tensor_copy(src, *out)) != 0) {
        nnt_temp_release(*out);
        *out = NULL;
    }
    return rc;
}
