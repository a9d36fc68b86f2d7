/* SPDX-License-Identifier: MIT */
/* nnt_tensor: a shape cut into a grid of tiles, one StarPU vector handle per tile. */
#include "internal.h"
#include "nnt_cpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t nnt_dtype_size(nnt_dtype dtype)
{
    switch (dtype) {
    case NNT_FP32: return sizeof(float);
    case NNT_INT32: return sizeof(int32_t);
    case NNT_BF16: return sizeof(uint16_t);
    default: return 0;
    }
}

int64_t nnt_dtype_bytes(nnt_dtype dtype, int64_t numel)
{
    if (dtype == NNT_NF4)
        return numel / 2 + numel / NNT_NF4_BLOCK * (int64_t)sizeof(float);
    return numel * (int64_t)nnt_dtype_size(dtype);
}

int nnt_tensor_check(const nnt_tensor *t, const char *func)
{
    if (!t)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: tensor is NULL", func);
    if (t->magic != NNT_TENSOR_MAGIC)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: not a tensor (destroyed already?)", func);
    if (!t->ctx || nnt_ctx_check(t->ctx, NULL) != 0)
        return nnt_fail(NULL, NNT_E_STATE, "%s: the tensor's context was destroyed", func);
    return NNT_OK;
}

int nnt_tensor_check_readable(const nnt_tensor *t, const char *func)
{
    int rc = nnt_tensor_check(t, func);
    if (rc == 0 && !t->written)
        rc = nnt_fail(t->ctx, NNT_E_STATE, "%s: the tensor holds no data: nothing was written "
                      "to it, or its contents were dropped (e.g. gradients by nnt_layer_"
                      "clear_grad); fill it or copy data into it first", func);
    return rc;
}

/* Validate shape and tile, fill t's geometry. */
static int set_geometry(const nnt_ctx *ctx, nnt_tensor *t, int ndim, const int64_t *shape, const int64_t *tile)
{
    const char *fn = "nnt_tensor_create";
    if (ndim < 1 || ndim > NNT_MAX_DIMS)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: ndim %d is not in 1..%d", fn, ndim, NNT_MAX_DIMS);
    if (!shape)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: shape is NULL", fn);
    int64_t numel = 1, tile_numel = 1, ntiles = 1;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] <= 0)
            return nnt_fail(ctx, NNT_E_INVAL, "%s: shape[%d] = %lld must be positive", fn, d,
                            (long long)shape[d]);
        if (tile && tile[d] <= 0)
            return nnt_fail(ctx, NNT_E_INVAL, "%s: tile[%d] = %lld must be positive", fn, d,
                            (long long)tile[d]);
        t->shape[d] = shape[d];
        t->tile[d] = (!tile || tile[d] > shape[d]) ? shape[d] : tile[d];   /* clamp */
        t->grid[d] = (shape[d] + t->tile[d] - 1) / t->tile[d];
        if (numel > INT64_MAX / shape[d])
            return nnt_fail(ctx, NNT_E_INVAL, "%s: number of elements overflows", fn);
        numel *= shape[d];
        tile_numel *= t->tile[d];
        ntiles *= t->grid[d];
    }
    if ((uint64_t)tile_numel > UINT32_MAX)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: a tile of %lld elements exceeds the limit of "
                        "2^32-1 elements per tile; use smaller tiles", fn, (long long)tile_numel);
    t->ntiles = ntiles;
    return NNT_OK;
}

int nnt_nf4_view(int ndim, const int64_t *shape, const int64_t *tile, int64_t *run)
{
    int j = ndim - 1;
    int64_t inner = 1;
    while (j >= 0 && tile[j] >= shape[j])   /* whole dims, innermost first */
        inner *= shape[j--];
    if (j < 0) {   /* one tile: one run */
        *run = inner;
        return inner % NNT_NF4_BLOCK == 0 ? 0 : -1;
    }
    *run = tile[j] * inner;
    return *run % NNT_NF4_BLOCK == 0 && shape[j] * inner % NNT_NF4_BLOCK == 0 ? j : -1;
}

/* NNT_NF4 quantizes blocks of NNT_NF4_BLOCK consecutive values (bitsandbytes' blocks of
 * the flattened tensor): every tile must hold whole blocks (nnt_nf4_view), so that its
 * blocks are the tensor's whatever the tiling. */
static int check_nf4_geometry(const nnt_ctx *ctx, const nnt_tensor *t, const char *fn)
{
    int64_t run = 0;
    if (nnt_nf4_view(t->ndim, t->shape, t->tile, &run) >= 0)
        return NNT_OK;
    return nnt_fail(ctx, NNT_E_SHAPE, "%s: NNT_NF4 quantizes blocks of %d consecutive values: "
                    "the runs of consecutive elements a tile holds (%lld here) and the "
                    "innermost dimensions they cut must hold whole blocks",
                    fn, NNT_NF4_BLOCK, (long long)run);
}

void nnt_tensor_tile_coord(const nnt_tensor *t, int64_t linear, int64_t *coord)
{
    for (int d = t->ndim - 1; d >= 0; d--) {
        coord[d] = linear % t->grid[d];
        linear /= t->grid[d];
    }
}

void nnt_tensor_tile_box(const nnt_tensor *t, const int64_t *coord, int64_t *origin,
                         int64_t *shape)
{
    for (int d = 0; d < t->ndim; d++) {
        origin[d] = coord[d] * t->tile[d];
        int64_t left = t->shape[d] - origin[d];
        shape[d] = left < t->tile[d] ? left : t->tile[d];
    }
}

/* The rank with the fewest bytes of parameter tiles, from the cyclic one on (ctx->lock
 * held); bytes are added to it. The same on every rank: all place the same tiles in the
 * same order. */
static int least_loaded_rank(nnt_ctx *ctx, int cyclic, int64_t bytes)
{
    int best = cyclic;
    for (int k = 1; k < ctx->nranks; k++) {
        int r = (cyclic + k) % ctx->nranks;
        if (ctx->ranks[r].params < ctx->ranks[best].params)
            best = r;
    }
    ctx->ranks[best].params += bytes;
    return best;
}

/* Each tile's owner rank: the context's distribution, beside's, or balanced for a
 * parameter (param: 1 place it, -1 take back a placement that was refused). */
static void place_tiles(nnt_tensor *t, const nnt_tensor *beside, int param)
{
    nnt_ctx *ctx = t->ctx;
    int balanced = param && ctx->mpi && ctx->distribution != NNT_DIST_ROOT;
    pthread_mutex_lock(&ctx->lock);
    if (param < 0) {
        for (int64_t i = 0; balanced && i < t->ntiles; i++)
            ctx->ranks[t->tiles[i].owner].params -= nnt_tensor_tile_bytes(t, i);
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    int64_t seq = ctx->tensors_created++;
    if (beside)
        seq = beside->place_seq;
    t->place_seq = seq;
    for (int64_t i = 0; i < t->ntiles; i++) {
        if (beside)
            t->tiles[i].owner = beside->tiles[i].owner;
        else if (balanced)
            t->tiles[i].owner = least_loaded_rank(ctx, nnt_tile_owner(t, seq, i),
                                                  nnt_tensor_tile_bytes(t, i));
        else
            t->tiles[i].owner = nnt_tile_owner(t, seq, i);
    }
    pthread_mutex_unlock(&ctx->lock);
}

/* Register every tile lazily: home node -1, StarPU allocates on first write; under MPI
 * with its owner and a tag. */
static void register_tiles(nnt_tensor *t)
{
    nnt_ctx *ctx = t->ctx;
    t->owned_bytes = 0;
    for (int64_t i = 0; i < t->ntiles; i++) {
        int64_t bytes = nnt_tensor_tile_bytes(t, i);
        nnt_moves_register(&t->tiles[i].handle, (uint32_t)(bytes / t->elsize), t->elsize,
                           t->kind);
        nnt_handle_mark_kind(t->tiles[i].handle, t->kind);
        nnt_mpi_register(ctx, t->tiles[i].handle, t->tiles[i].owner);
        if (t->tiles[i].owner == ctx->rank)
            t->owned_bytes += bytes;
    }
    pthread_mutex_lock(&ctx->lock);
    ctx->owned_bytes += t->owned_bytes;
    pthread_mutex_unlock(&ctx->lock);
}

/* nnt_tensor_create with a placement hint (rows) and, when beside is not NULL, beside's
 * tile owners (nnt_tensor_create_placed / _beside / _param in internal.h). */
static int create(nnt_ctx *ctx, nnt_dtype dtype, int ndim, const int64_t *shape,
                  const int64_t *tile, unsigned rows, const nnt_tensor *beside, int param,
                  int held, nnt_tensor **out)
{
    const char *fn = "nnt_tensor_create";
    if (!out)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: output pointer is NULL", fn);
    *out = NULL;
    int rc = nnt_ctx_check(ctx, fn);
    if (rc)
        return rc;
    if (dtype == NNT_FP16)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: dtype NNT_FP16 is reserved and not "
                        "supported yet", fn);
    if (nnt_dtype_size(dtype) == 0 && dtype != NNT_NF4)
        return nnt_fail(ctx, NNT_E_INVAL, "%s: unknown dtype %d", fn, (int)dtype);

    nnt_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of host memory", fn);
    rc = set_geometry(ctx, t, ndim, shape, tile);
    if (rc == 0 && dtype == NNT_NF4)
        rc = check_nf4_geometry(ctx, t, fn);
    if (rc) {
        free(t);
        return rc;
    }
    if ((uint64_t)t->ntiles > SIZE_MAX / sizeof *t->tiles ||
        !(t->tiles = calloc((size_t)t->ntiles, sizeof *t->tiles))) {
        long long ntiles = (long long)t->ntiles;
        free(t);
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: cannot allocate %lld tile records", fn, ntiles);
    }
    t->magic = NNT_TENSOR_MAGIC;
    t->ctx = ctx;
    t->dtype = dtype;
    t->elsize = dtype == NNT_NF4 ? 1 : nnt_dtype_size(dtype);
    t->rows = nnt_rows_hint(rows, ndim);
    int spread = ctx->mpi && ctx->distribution != NNT_DIST_ROOT;
    t->stays = (held & 3) == NNT_HELD_STAYS && spread;
    t->released = (held & 3) == NNT_HELD_RELEASED && spread && ctx->release_weights;
    t->deferred = (held & NNT_HELD_DEFERRED) != 0;
    t->kind = param ? NNT_MEM_WEIGHTS : NNT_MEM_TENSORS;
    place_tiles(t, beside, param);   /* the budget check counts each rank's tiles */
    if ((rc = nnt_ctx_add_tensor(ctx, t, fn)) != 0) {
        if (param)
            place_tiles(t, beside, -1);
        free(t->tiles);
        free(t);
        return rc;
    }
    register_tiles(t);
    *out = t;
    return NNT_OK;
}

int nnt_tensor_create(nnt_ctx *ctx, nnt_dtype dtype, int ndim, const int64_t *shape,
                      const int64_t *tile, nnt_tensor **out)
{
    return create(ctx, dtype, ndim, shape, tile, 0, NULL, 0, 0, out);
}

int nnt_tensor_create_placed(nnt_ctx *ctx, nnt_dtype dtype, int ndim, const int64_t *shape,
                             const int64_t *tile, unsigned rows, nnt_tensor **out)
{
    return create(ctx, dtype, ndim, shape, tile, rows, NULL, 0, 0, out);
}

int nnt_tensor_create_beside(nnt_ctx *ctx, nnt_dtype dtype, int ndim, const int64_t *shape,
                             const int64_t *tile, const nnt_tensor *beside, int held,
                             nnt_tensor **out)
{
    return create(ctx, dtype, ndim, shape, tile, beside->rows, beside, 0, held, out);
}

int nnt_tensor_create_param(nnt_ctx *ctx, int ndim, const int64_t *shape, const int64_t *tile,
                            int deferred, nnt_tensor **out)
{
    return create(ctx, NNT_FP32, ndim, shape, tile, 0, NULL, 1,
                  NNT_HELD_RELEASED | (deferred ? NNT_HELD_DEFERRED : 0), out);
}

/* ---- a parameter's bf16 copy ----------------------------------------------------------- */

void nnt_tensor_copy_unlink(nnt_tensor *t)
{
    if (t->bf16_copy) {
        t->bf16_copy->copy_src = NULL;
        t->bf16_copy = NULL;
    }
    if (t->copy_src) {
        t->copy_src->bf16_copy = NULL;
        t->copy_src = NULL;
    }
    free(t->copy_versions);
    t->copy_versions = NULL;
}

int nnt_tensor_copy_link(nnt_tensor *w, nnt_tensor *copy)
{
    if (w->bf16_copy == copy && copy->copy_src == w)
        return NNT_OK;
    uint64_t *versions = calloc((size_t)copy->ntiles, sizeof *versions);
    if (!versions)
        return nnt_fail(w->ctx, NNT_E_NOMEM, "nnt: out of host memory for a bf16 copy's record");
    nnt_tensor_copy_unlink(copy);
    if (w->bf16_copy)   /* a copy made before: it no longer follows w */
        nnt_tensor_copy_unlink(w->bf16_copy);
    w->bf16_copy = copy;
    copy->copy_src = w;
    copy->copy_versions = versions;
    return NNT_OK;
}

int nnt_tensor_copy_current(const nnt_tensor *copy)
{
    const nnt_tensor *w = copy->copy_src;
    if (!w || w->ntiles != copy->ntiles)
        return 0;
    for (int64_t i = 0; i < w->ntiles; i++)
        if (copy->copy_versions[i] != nnt_handle_version(w->tiles[i].handle) + 1)
            return 0;
    return 1;
}

void nnt_tensor_copy_mark(nnt_tensor *copy, int64_t i)
{
    const nnt_tensor *w = copy->copy_src;
    if (!w)
        return;
    for (int64_t j = i < 0 ? 0 : i; j < (i < 0 ? w->ntiles : i + 1); j++)
        copy->copy_versions[j] = nnt_handle_version(w->tiles[j].handle) + 1;
}

void nnt_tensor_copy_forget(nnt_tensor *t)
{
    nnt_tensor *copy = t->copy_src ? t : t->bf16_copy;
    if (copy && copy->copy_versions)
        memset(copy->copy_versions, 0, (size_t)copy->ntiles * sizeof *copy->copy_versions);
}

int nnt_tensor_destroy(nnt_tensor *t)
{
    if (!t)
        return NNT_OK;
    if (t->magic != NNT_TENSOR_MAGIC)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_tensor_destroy: not a tensor (destroyed already?)");
    if (t->ctx && nnt_ctx_check(t->ctx, NULL) == 0) {
        nnt_gemm_kept_free(t);
        nnt_ctx_remove_tensor(t->ctx, t);
        for (int64_t i = 0; i < t->ntiles; i++)   /* waits for pending tasks on each tile */
            starpu_data_unregister_no_coherency(t->tiles[i].handle);
    }
    nnt_tensor_copy_unlink(t);
    free(t->tiles);
    free(t->ids_host);
    t->magic = 0;
    free(t);
    return NNT_OK;
}

/* ---- queries --------------------------------------------------------------------------- */

/* Queries work on orphaned tensors too: the geometry outlives the context. */
static int check_query(const nnt_tensor *t, const void *out, const char *fn)
{
    if (!t)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: tensor is NULL", fn);
    if (t->magic != NNT_TENSOR_MAGIC)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: not a tensor (destroyed already?)", fn);
    if (!out)
        return nnt_fail(t->ctx, NNT_E_INVAL, "%s: output pointer is NULL", fn);
    return NNT_OK;
}

int nnt_tensor_dtype(const nnt_tensor *t, nnt_dtype *dtype)
{
    int rc = check_query(t, dtype, "nnt_tensor_dtype");
    if (rc == 0)
        *dtype = t->dtype;
    return rc;
}

int nnt_tensor_ndim(const nnt_tensor *t, int *ndim)
{
    int rc = check_query(t, ndim, "nnt_tensor_ndim");
    if (rc == 0)
        *ndim = t->ndim;
    return rc;
}

int nnt_tensor_shape(const nnt_tensor *t, int64_t *shape)
{
    int rc = check_query(t, shape, "nnt_tensor_shape");
    if (rc == 0)
        memcpy(shape, t->shape, (size_t)t->ndim * sizeof *shape);
    return rc;
}

int nnt_tensor_tile_shape(const nnt_tensor *t, int64_t *tile)
{
    int rc = check_query(t, tile, "nnt_tensor_tile_shape");
    if (rc == 0)
        memcpy(tile, t->tile, (size_t)t->ndim * sizeof *tile);
    return rc;
}

int nnt_tensor_grid(const nnt_tensor *t, int64_t *grid)
{
    int rc = check_query(t, grid, "nnt_tensor_grid");
    if (rc == 0)
        memcpy(grid, t->grid, (size_t)t->ndim * sizeof *grid);
    return rc;
}

int nnt_tensor_numel(const nnt_tensor *t, int64_t *numel)
{
    int rc = check_query(t, numel, "nnt_tensor_numel");
    if (rc == 0)
        *numel = nnt_box_numel(t->ndim, t->shape);
    return rc;
}

int nnt_tensor_ntiles(const nnt_tensor *t, int64_t *ntiles)
{
    int rc = check_query(t, ntiles, "nnt_tensor_ntiles");
    if (rc == 0)
        *ntiles = t->ntiles;
    return rc;
}

/* ---- host copies ------------------------------------------------------------------------ */

static int check_host_copy(const nnt_tensor *t, const void *buf, size_t bytes, int reading,
                           const char *fn)
{
    int rc = reading ? nnt_tensor_check_readable(t, fn) : nnt_tensor_check(t, fn);
    if (rc)
        return rc;
    if (!buf)
        return nnt_fail(t->ctx, NNT_E_INVAL, "%s: host buffer is NULL", fn);
    uint64_t want = (uint64_t)nnt_tensor_bytes(t);
    if ((uint64_t)bytes != want)
        return nnt_fail(t->ctx, NNT_E_SHAPE, "%s: buffer has %zu bytes, the tensor %llu", fn,
                        bytes, (unsigned long long)want);
    return NNT_OK;
}

/* Under MPI (collective): before a read every owner sends its tiles to every other rank,
 * so that each has the whole tensor; before a write the other ranks drop the copies they
 * received, and only the owner writes a tile. */
static void host_copy_exchange(nnt_tensor *t, int to_tiles)
{
    if (to_tiles) {
        nnt_tensor_forget_copies(t);
        return;
    }
    for (int64_t i = 0; i < t->ntiles; i++)
        nnt_mpi_share(t->ctx, t->tiles[i].handle, t->tiles[i].owner);
}

/* One part of a tile copied between the host array and the tile's memory, both seen as nd
 * dimensions: the tensor's shape hshape, the tile's tshape at origin. Its elements of esz
 * bytes are div of those along the last dimension, starting host_at bytes into the host
 * array and tile_at bytes into the tile. Every dtype's elements are one part (div 1); an
 * NNT_NF4 tensor's codes (two a byte) and its absmax (one a block) are two, each laid out
 * row-major as the elements are. */
static void copy_part(int nd, const int64_t *hshape_in, const int64_t *tshape_in,
                      const int64_t *origin, char *host, char *tile, int to_tiles, int64_t div,
                      size_t esz, int64_t host_at, int64_t tile_at)
{
    int64_t hshape[NNT_MAX_DIMS], tshape[NNT_MAX_DIMS];
    int64_t host_stride[NNT_MAX_DIMS], tile_stride[NNT_MAX_DIMS];
    memcpy(hshape, hshape_in, (size_t)nd * sizeof *hshape);
    memcpy(tshape, tshape_in, (size_t)nd * sizeof *tshape);
    hshape[nd - 1] /= div;
    tshape[nd - 1] /= div;
    nnt_row_major_strides(nd, hshape, host_stride);
    nnt_row_major_strides(nd, tshape, tile_stride);
    int64_t offset = 0;
    for (int d = 0; d < nd; d++)
        offset += (d == nd - 1 ? origin[d] / div : origin[d]) * host_stride[d];
    char *h = host + host_at + offset * (int64_t)esz, *p = tile + tile_at;
    if (to_tiles)
        nnt_cpu_copy_box(nd, tshape, esz, h, host_stride, p, tile_stride);
    else
        nnt_cpu_copy_box(nd, tshape, esz, p, tile_stride, h, host_stride);
}

/* An NNT_NF4 tile (origin, shape) and its tensor seen with the whole innermost dimensions
 * its runs cover folded into the one they cut (nnt_nf4_view), so that a run is a row of the
 * last dimension: the codes and absmax of the tile copied as two parts (copy_part). */
static void copy_nf4_tile(const nnt_tensor *t, char *host, char *tile, const int64_t *origin,
                          const int64_t *shape, int to_tiles)
{
    int64_t run = 0, hs[NNT_MAX_DIMS], ts[NNT_MAX_DIMS], org[NNT_MAX_DIMS];
    int j = nnt_nf4_view(t->ndim, t->shape, t->tile, &run);   /* >= 0: checked at creation */
    const int nd = j + 1;
    for (int d = 0; d <= j; d++)
        hs[d] = t->shape[d], ts[d] = shape[d], org[d] = origin[d];
    for (int d = j + 1; d < t->ndim; d++) {   /* folded into dim j */
        hs[j] *= t->shape[d];
        ts[j] *= t->shape[d];
        org[j] *= t->shape[d];
    }
    const int64_t numel = nnt_box_numel(t->ndim, t->shape), n = nnt_box_numel(t->ndim, shape);
    copy_part(nd, hs, ts, org, host, tile, to_tiles, 2, 1, 0, 0);
    copy_part(nd, hs, ts, org, host, tile, to_tiles, NNT_NF4_BLOCK, sizeof(float), numel / 2,
              n / 2);
}

/* Copy between the host array and every tile; to_tiles picks the direction. Each tile is
 * acquired in RAM (waiting for the tasks that use it), copied, and released. An NNT_NF4
 * tensor's host array is bitsandbytes' form of the whole tensor: every code (numel / 2
 * bytes), then every block's absmax. */
static int host_copy(nnt_tensor *t, char *host, int to_tiles, const char *fn)
{
    int64_t coord[NNT_MAX_DIMS], origin[NNT_MAX_DIMS], shape[NNT_MAX_DIMS];
    if (t->ctx->mpi)
        host_copy_exchange(t, to_tiles);
    for (int64_t i = 0; i < t->ntiles; i++) {
        starpu_data_handle_t h = t->tiles[i].handle;
        if (to_tiles && t->tiles[i].owner != t->ctx->rank)
            continue;   /* under MPI: another rank's tile, written from its buffer */
        if (starpu_data_acquire(h, to_tiles ? STARPU_W : STARPU_R) != 0)
            return nnt_fail(t->ctx, NNT_E_RUNTIME, "%s: cannot acquire tile %lld", fn,
                            (long long)i);
        if (to_tiles)
            nnt_handle_written(h);
        nnt_tensor_tile_coord(t, i, coord);
        nnt_tensor_tile_box(t, coord, origin, shape);
        char *tile_ptr = (char *)STARPU_VECTOR_GET_PTR(starpu_data_get_interface_on_node(h, STARPU_MAIN_RAM));
        if (t->dtype == NNT_NF4)
            copy_nf4_tile(t, host, tile_ptr, origin, shape, to_tiles);
        else
            copy_part(t->ndim, t->shape, shape, origin, host, tile_ptr, to_tiles, 1, t->elsize,
                      0, 0);
        starpu_data_release(h);
    }
    /* a checkpoint's tensors, one at a time on each rank (the RAM budget counts a tensor
     * that stays on its owners on other ranks only for such a read) */
    if (!to_tiles && (t->ctx->release_weights || t->stays))
        nnt_tensor_forget_copies(t);
    return NNT_OK;
}

/* The range of the int32 values of an NNT_INT32 tensor written from the host (ids_known). */
static void note_ids(nnt_tensor *t, const int32_t *v, int64_t n)
{
    t->ids_known = t->dtype == NNT_INT32 && n > 0;
    if (!t->ids_known)
        return;
    t->ids_min = t->ids_max = v[0];
    t->ids_argmin = t->ids_argmax = 0;
    for (int64_t i = 1; i < n; i++) {
        if (v[i] < t->ids_min)
            t->ids_min = v[i], t->ids_argmin = i;
        if (v[i] > t->ids_max)
            t->ids_max = v[i], t->ids_argmax = i;
    }
}

/* A copy of the n int32 values v of t on the host (ids_host); none when out of memory. */
static void keep_values(nnt_tensor *t, const int32_t *v, int64_t n)
{
    t->ids_host_n = 0;
    if (t->dtype != NNT_INT32 || n <= 0)
        return;
    int32_t *h = realloc(t->ids_host, (size_t)n * sizeof *h);
    if (!h)
        return;   /* (the old array stays owned) */
    memcpy(h, v, (size_t)n * sizeof *h);
    t->ids_host = h;
    t->ids_host_n = n;
}

void nnt_tensor_copy_known_ids(const nnt_tensor *src, nnt_tensor *dst)
{
    int64_t n = 1;
    for (int d = 0; d < dst->ndim; d++)
        n *= dst->shape[d];
    if (src->ids_host_n == n && src->ids_host)
        keep_values(dst, src->ids_host, n);
}

int nnt_tensor_count_first_write(nnt_tensor *t, const char *func)
{
    return t->deferred ? nnt_ctx_count_deferred(t->ctx, t, func) : NNT_OK;
}

int nnt_tensor_copy_from_host(nnt_tensor *t, const void *src, size_t bytes)
{
    const char *fn = "nnt_tensor_copy_from_host";
    int rc = check_host_copy(t, src, bytes, 0, fn);
    if (rc == 0)
        rc = nnt_tensor_count_first_write(t, fn);
    if (rc == 0 && (rc = host_copy(t, (char *)(uintptr_t)src, 1, fn)) == 0) {
        t->written = 1;
        note_ids(t, src, (int64_t)(bytes / t->elsize));
        keep_values(t, src, (int64_t)(bytes / t->elsize));
    }
    return rc;
}

int nnt_tensor_copy_to_host(nnt_tensor *t, void *dst, size_t bytes)
{
    const char *fn = "nnt_tensor_copy_to_host";
    int rc = check_host_copy(t, dst, bytes, 1, fn);
    return rc ? rc : host_copy(t, dst, 0, fn);
}

/* ---- fills ------------------------------------------------------------------------------- */

int nnt_tensor_fill(nnt_tensor *t, double value)
{
    const char *fn = "nnt_tensor_fill";
    int rc = nnt_tensor_check(t, fn);
    if (rc)
        return rc;
    if (t->dtype == NNT_NF4)
        return nnt_fail(t->ctx, NNT_E_UNSUPPORTED, "%s: an NNT_NF4 tensor is written by "
                        "nnt_tensor_convert (quantized) or nnt_tensor_copy_from_host", fn);
    if (t->dtype == NNT_INT32 && !(value >= INT32_MIN && value <= INT32_MAX &&
                                   value == (double)(int32_t)value))
        return nnt_fail(t->ctx, NNT_E_INVAL, "%s: %g is not an int32 value", fn, value);
    NNT_TRY(nnt_tensor_count_first_write(t, fn));
    for (int64_t i = 0; i < t->ntiles && rc == 0; i++)
        rc = nnt_insert_fill(t, t->tiles[i].handle, value);
    if (rc == 0) {
        int32_t v = t->dtype == NNT_INT32 ? (int32_t)value : 0;
        t->written = 1;
        note_ids(t, &v, 1);   /* every element v: the first holds it */
        t->ids_host_n = 0;    /* (the values kept are not written out for a fill) */
    }
    return rc;
}

static int fill_random(nnt_tensor *t, uint64_t seed, int dist, double a, double b,
                       const char *fn)
{
    int rc = nnt_tensor_check(t, fn);
    if (rc)
        return rc;
    if (t->dtype != NNT_FP32)
        return nnt_fail(t->ctx, NNT_E_UNSUPPORTED, "%s: only NNT_FP32 tensors", fn);
    if (dist == 0 && !(a <= b))
        return nnt_fail(t->ctx, NNT_E_INVAL, "%s: low %g > high %g (or NaN)", fn, a, b);
    if (dist == 1 && (!(b >= 0) || a != a))
        return nnt_fail(t->ctx, NNT_E_INVAL, "%s: stddev %g must be >= 0 (mean %g)", fn, b, a);
    NNT_TRY(nnt_tensor_count_first_write(t, fn));
    int64_t coord[NNT_MAX_DIMS], origin[NNT_MAX_DIMS], shape[NNT_MAX_DIMS];
    for (int64_t i = 0; i < t->ntiles && rc == 0; i++) {
        nnt_tensor_tile_coord(t, i, coord);
        nnt_tensor_tile_box(t, coord, origin, shape);
        rc = nnt_insert_fill_random(t, t->tiles[i].handle, origin, shape, seed, dist,
                                    (float)a, (float)b);
    }
    if (rc == 0)
        nnt_tensor_mark_written(t);
    return rc;
}

int nnt_tensor_fill_uniform(nnt_tensor *t, uint64_t seed, double low, double high)
{
    return fill_random(t, seed, 0, low, high, "nnt_tensor_fill_uniform");
}

int nnt_tensor_fill_normal(nnt_tensor *t, uint64_t seed, double mean, double stddev)
{
    return fill_random(t, seed, 1, mean, stddev, "nnt_tensor_fill_normal");
}

int nnt_tensor_dropout(nnt_tensor *x, uint64_t seed, double p, nnt_tensor *y)
{
    const char *fn = "nnt_tensor_dropout";
    int rc = nnt_tensor_check(x, fn);
    if (rc == 0)
        rc = nnt_tensor_check(y, fn);
    if (rc)
        return rc;
    if (!(p >= 0.0 && p < 1.0))
        return nnt_fail(x->ctx, NNT_E_INVAL, "%s: p %g must be in [0, 1)", fn, p);
    if (x->dtype != NNT_FP32 || y->dtype != NNT_FP32)
        return nnt_fail(x->ctx, NNT_E_UNSUPPORTED, "%s: only NNT_FP32 tensors", fn);
    if ((rc = nnt_check_same_layout(fn, "x", x, "y", y)) ||
        (rc = nnt_tensor_check_readable(x, fn)))
        return rc;
    if (x != y && (rc = nnt_tensor_copy(x, y)))
        return rc;
    int64_t coord[NNT_MAX_DIMS], origin[NNT_MAX_DIMS], shape[NNT_MAX_DIMS];
    for (int64_t i = 0; i < y->ntiles && rc == 0; i++) {
        nnt_tensor_tile_coord(y, i, coord);
        nnt_tensor_tile_box(y, coord, origin, shape);
        rc = nnt_insert_fill_random(y, y->tiles[i].handle, origin, shape, seed, 2, (float)p,
                                    (float)(1.0 / (1.0 - p)));
    }
    return rc;
}

/* fn on every tile handle of a live tensor; 0 if t is not one. */
static int each_tile(nnt_tensor *t, void (*fn)(starpu_data_handle_t))
{
    if (!t || t->magic != NNT_TENSOR_MAGIC || !t->ctx)
        return 0;
    for (int64_t i = 0; i < t->ntiles; i++)
        fn(t->tiles[i].handle);
    return 1;
}

int nnt_tensor_wait_written(nnt_tensor *t)
{
    for (int64_t i = 0; i < t->ntiles; i++) {
        starpu_data_handle_t h = t->tiles[i].handle;
        /* under MPI only the owner writes a tile (elsewhere it may hold no data, which
         * StarPU refuses to acquire) */
        if (t->tiles[i].owner != t->ctx->rank)
            continue;
        if (starpu_data_acquire_on_node(h, STARPU_ACQUIRE_NO_NODE, STARPU_R) != 0)
            return nnt_fail(t->ctx, NNT_E_RUNTIME, "cannot wait for tile %lld of a tensor",
                            (long long)i);
        starpu_data_release_on_node(h, STARPU_ACQUIRE_NO_NODE);
    }
    return NNT_OK;
}

static int owns_a_tile(const nnt_tensor *t, int rank)
{
    for (int64_t i = 0; i < t->ntiles; i++)
        if (t->tiles[i].owner == rank)
            return 1;
    return 0;
}

int nnt_tensor_wait_computed(nnt_tensor *t)
{
    NNT_TRY(nnt_tensor_wait_written(t));
    nnt_ctx *ctx = t->ctx;
    if (!ctx->mpi || ctx->nranks < 2)
        return NNT_OK;
    int received = 0;
    for (int r = 0; r < ctx->nranks; r++)
        if (!owns_a_tile(t, r)) {
            nnt_mpi_receive_wait(ctx, t->tiles[0].handle, r);
            received = 1;
        }
    if (received)
        nnt_mpi_forget_copies(ctx, t->tiles[0].handle);
    return NNT_OK;
}

void nnt_tensor_forget_copies(nnt_tensor *t)
{
    if (t && t->magic == NNT_TENSOR_MAGIC && t->ctx && t->ctx->mpi)
        for (int64_t i = 0; i < t->ntiles; i++)
            nnt_mpi_forget_copies(t->ctx, t->tiles[i].handle);
}

void nnt_tensor_invalidate(nnt_tensor *t)
{
    nnt_tensor_forget_copies(t);   /* no rank keeps a stale copy */
    nnt_tensor_copy_forget(t);
    if (each_tile(t, starpu_data_invalidate_submit))
        t->written = 0, t->ids_known = 0, t->ids_host_n = 0;
}

/* Only under a RAM budget or with a swap, the only case where the hint helps: without
 * one, StarPU's wont_use (a non-blocking read acquire) raced with the destruction of the
 * tensor and the reuse of its handles, and aborted in StarPU ("handle ... is not
 * initialized while trying to read it"; seen in tests/test_model, several optimizers
 * created and destroyed in turn). */
void nnt_tensor_wont_use(nnt_tensor *t)
{
    if (!t || t->magic != NNT_TENSOR_MAGIC || !t->ctx)
        return;
    if (!((t->ctx->ram_budget > 0 && !t->ctx->ram_budget_default) || t->ctx->disk_node >= 0))
        return;
    for (int64_t i = 0; i < t->ntiles; i++)   /* a read: under MPI only where the data is */
        if (t->tiles[i].owner == t->ctx->rank)
            starpu_data_wont_use(t->tiles[i].handle);
}

/* ---- storage dtype ----------------------------------------------------------------------- */

void nnt_tensor_set_kind(nnt_tensor *t, int kind)
{
    t->kind = kind;
    for (int64_t i = 0; t->ctx && i < t->ntiles; i++) {
        nnt_moves_set_kind(t->tiles[i].handle, kind);
        nnt_handle_mark_kind(t->tiles[i].handle, kind);
    }
}

/* How a tensor made beside t is held: as t is. */
static int held_like(const nnt_tensor *t)
{
    return t->released ? NNT_HELD_RELEASED : t->stays ? NNT_HELD_STAYS : NNT_HELD_ANYWHERE;
}

int nnt_tensor_retype(nnt_tensor *t, nnt_dtype dtype)
{
    if (t->dtype == dtype)
        return NNT_OK;
    nnt_tensor *n = NULL;   // t's layout
    NNT_TRY(nnt_tensor_create_beside(t->ctx, dtype, t->ndim, t->shape, t->tile, t,
                                     held_like(t), &n));
    int rc = t->written ? nnt_tensor_convert(t, n) : NNT_OK;
    if (rc) {
        nnt_tensor_destroy(n);
        return rc;
    }
    /* t takes n's tiles and n t's: the context's byte counts, made of both, stay right (a
     * deferred t's tiles, uncounted, stay uncounted with n; t's new tiles are counted) */
    pthread_mutex_lock(&t->ctx->lock);
    nnt_tensor keep = *t;
    t->dtype = n->dtype, t->elsize = n->elsize, t->tiles = n->tiles;
    t->owned_bytes = n->owned_bytes, t->stays = n->stays, t->released = n->released;
    t->deferred = n->deferred;
    n->dtype = keep.dtype, n->elsize = keep.elsize, n->tiles = keep.tiles;
    n->owned_bytes = keep.owned_bytes, n->stays = keep.stays, n->released = keep.released;
    n->deferred = keep.deferred;
    pthread_mutex_unlock(&t->ctx->lock);
    nnt_tensor_set_kind(t, t->kind);   /* the new tiles were n's */
    nnt_tensor_copy_forget(t);   /* whose versions say nothing of the copy */
    /* the packs of the old tiles (their write counts would pass for the new tiles') */
    nnt_gemm_kept_retire(t);
    nnt_temp_release(n);   /* after the conversion that reads its tiles */
    return NNT_OK;
}

/* An NNT_NF4 tensor's values through floats: dequantized into a float tensor beside it
 * (to_host) or quantized from one (from_host). */
static int nf4_host_f32(nnt_tensor *t, float *buf, int64_t n, int to_host)
{
    nnt_tensor *f = NULL;   // t's layout, its tiles where t's are, floats
    NNT_TRY(nnt_tensor_create_beside(t->ctx, NNT_FP32, t->ndim, t->shape, t->tile, t,
                                     held_like(t), &f));
    int rc = to_host ? nnt_tensor_convert(t, f)
                     : nnt_tensor_copy_from_host(f, buf, (size_t)n * sizeof *buf);
    if (rc == 0)
        rc = to_host ? nnt_tensor_copy_to_host(f, buf, (size_t)n * sizeof *buf)
                     : nnt_tensor_convert(f, t);
    nnt_temp_release(f);   /* after the tasks that read it */
    return rc;
}

int nnt_tensor_to_host_f32(nnt_tensor *t, float *buf, int64_t n)
{
    if (t->dtype == NNT_NF4)
        return nf4_host_f32(t, buf, n, 1);
    if (t->dtype != NNT_BF16)
        return nnt_tensor_copy_to_host(t, buf, (size_t)n * sizeof *buf);
    NNT_TRY(nnt_tensor_copy_to_host(t, buf, (size_t)n * sizeof(uint16_t)));
    /* widened in place from the end: float i covers the bf16 values 2i and 2i + 1, which are
     * read already (or, for i = 0, value 0 is read first) */
    unsigned char *b = (unsigned char *)buf;
    for (int64_t i = n; i-- > 0;) {
        uint16_t h;
        memcpy(&h, b + 2 * i, sizeof h);
        uint32_t bits = (uint32_t)h << 16;
        memcpy(b + 4 * i, &bits, sizeof bits);
    }
    return NNT_OK;
}

int nnt_tensor_from_host_f32(nnt_tensor *t, const float *buf, int64_t n)
{
    if (t->dtype == NNT_NF4)
        return nf4_host_f32(t, (float *)(uintptr_t)buf, n, 0);
    if (t->dtype != NNT_BF16)
        return nnt_tensor_copy_from_host(t, buf, (size_t)n * sizeof *buf);
    uint16_t *h = malloc((size_t)n * sizeof *h + 1);
    if (!h)
        return nnt_fail(t->ctx, NNT_E_NOMEM, "nnt_tensor_copy_from_host: out of memory for "
                        "%lld bf16 values", (long long)n);
    nnt_cpu_f32_to_bf16(n, buf, h);
    int rc = nnt_tensor_copy_from_host(t, h, (size_t)n * sizeof *h);
    free(h);
    return rc;
}
