/* SPDX-License-Identifier: MIT */
/* Several processes over StarPU-MPI: start-up and the cross-rank option check, tile owners and
 * tags, task submission (owner computes) and the collective steps of host copies. Without
 * StarPU-MPI compiled in (NNT_HAVE_MPI unset) the same functions exist and a request for MPI
 * fails with NNT_E_UNSUPPORTED; nothing else is called with ctx->mpi = 0. */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>

#ifdef NNT_HAVE_MPI
#include <starpu_mpi.h>
#endif

/* An activation (NNT_DIST_DATA, NNT_DIST_SHARDED): the tile's row (its coordinates along the hinted batch and
 * sequence dimensions, row-major) in contiguous blocks of rows per rank, so that a rank's
 * rows are the same in every activation of the same (B, T) tiling, and a product summed
 * over rows meets few owners (one run of rows per rank). */
static int row_owner(const nnt_tensor *t, int64_t tile)
{
    int64_t coord[NNT_MAX_DIMS], row = 0, nrows = 1;
    nnt_tensor_tile_coord(t, tile, coord);
    for (int d = 0; d < t->ndim; d++)
        if (t->rows & (1u << d)) {
            row = row * t->grid[d] + coord[d];
            nrows *= t->grid[d];
        }
    return (int)(row * t->ctx->nranks / nrows);
}

int nnt_tile_owner(const nnt_tensor *t, int64_t tensor_seq, int64_t tile)
{
    const nnt_ctx *ctx = t->ctx;
    if (!ctx->mpi || ctx->distribution == NNT_DIST_ROOT)
        return 0;
    if (t->rows)   /* NNT_DIST_DATA or NNT_DIST_SHARDED */
        return row_owner(t, tile);
    return (int)((tensor_seq + tile) % ctx->nranks);   /* cyclic */
}

int nnt_ctx_rank(const nnt_ctx *ctx, int *rank, int *size)
{
    int rc = nnt_ctx_check(ctx, "nnt_ctx_rank");
    if (rc)
        return rc;
    if (rank)
        *rank = ctx->rank;
    if (size)
        *size = ctx->nranks;
    return NNT_OK;
}

int nnt_mpi_saved(nnt_ctx *ctx, int rc, const char *fn, const char *path)
{
    if (!ctx->mpi || ctx->nranks < 2)
        return rc;
    int64_t failed = rc != 0;
    int agreed = nnt_mpi_max(ctx, &failed, 1);
    if (rc || agreed)
        return rc ? rc : agreed;
    return failed ? nnt_fail(ctx, NNT_E_IO, "%s: %s: not saved: another rank of the job "
                             "failed (rank 0's message says why)", fn, path)
                  : NNT_OK;
}

#ifdef NNT_HAVE_MPI

/* FNV-1a over the options every rank must agree on (and the library version). */
static uint64_t options_hash(const nnt_ctx_options *o)
{
    const int fields[] = {o->mpi, o->distribution, o->release_weights, NNT_VERSION_MAJOR,
                          NNT_VERSION_MINOR, NNT_VERSION_PATCH};
    const unsigned char *p = (const unsigned char *)fields;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof fields; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void finalize_mpi(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Finalize();
}

/* MPI started once per process (StarPU-MPI is then started and stopped with each context):
 * MPI cannot be initialised twice, so it is finalised at exit. */
static int init_mpi(void)
{
    int initialized = 0, provided = 0;
    MPI_Initialized(&initialized);
    if (initialized)
        return NNT_OK;
    /* StarPU-MPI's progress thread polls MPI_Test while any transfer is in flight; Open
     * MPI's yield_when_idle makes each fruitless poll yield the core, so that a worker that
     * shares it runs (bench/RESULTS-mpi.md: 2 ranks on 2 cores 1.75x faster on a small
     * model). A value the user set (environment, mpirun --mca) stands. */
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return nnt_fail(NULL, NNT_E_RUNTIME, "nnt_ctx_create: MPI_Init_thread failed");
    atexit(finalize_mpi);
    return NNT_OK;
}

/* The ranks of MPI_COMM_WORLD on this rank's node, this one included (collective; 1 if MPI
 * cannot tell). */
static int ranks_on_node(void)
{
    MPI_Comm node;
    int n = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return 1;
    if (MPI_Comm_size(node, &n) != MPI_SUCCESS || n < 1)
        n = 1;
    MPI_Comm_free(&node);
    return n;
}

int nnt_mpi_agree(const nnt_ctx_options *o, int local_rc, int *rank, int *nranks,
                  int64_t *ram_mib, int *node_ranks)
{
    int rc = init_mpi();
    if (rc)
        return rc;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, nranks);
    *node_ranks = ranks_on_node();
    /* a rank's memory: its budget when given, else its share of its node's, which the
     * ranks on the node divide (the smallest rank's is then the least of those) */
    if (!(o->mem_cpu_mib > 0) && *node_ranks > 1)
        *ram_mib /= *node_ranks;
    /* max of (hash, -hash, failed, -RAM): equal hashes iff max(hash) == -max(-hash) */
    uint64_t h = options_hash(o) >> 2;   /* fits a signed 64-bit value and its negation */
    long long mine[4] = {(long long)h, -(long long)h, local_rc != 0, -(long long)*ram_mib};
    long long all[4];
    if (MPI_Allreduce(mine, all, 4, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return nnt_fail(NULL, NNT_E_RUNTIME, "nnt_ctx_create: MPI_Allreduce of the options "
                        "failed");
    *ram_mib = -all[3];
    if (local_rc)
        return local_rc;   /* this rank's own message stands */
    if (all[2])
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: another rank of this MPI job "
                        "failed to create its context (its own message says why; rank %d of "
                        "%d)", *rank, *nranks);
    if (all[0] != -all[1])
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: the ranks of this MPI job were "
                        "given different options (mpi, distribution, release_weights) or run "
                        "different nnt versions; every rank must create its context alike "
                        "(rank %d of %d)",
                        *rank, *nranks);
    return NNT_OK;
}

int nnt_mpi_init_runtime(struct starpu_conf *conf)
{
    return starpu_mpi_init_conf(NULL, NULL, 0, MPI_COMM_WORLD, conf);
}

void nnt_mpi_shutdown_runtime(void)
{
    starpu_mpi_shutdown();
}

/* The local tasks only. starpu_mpi_wait_for_all deadlocked here (1 run in 3, 2 ranks): its
 * barrier blocks StarPU-MPI's one communication thread, so a send that becomes ready just
 * after the local tasks finished is never posted, and the peer waits for it forever. The
 * ranks need no barrier: every transfer a rank waits for is posted by its peer's own flow. */
int nnt_mpi_wait_all(void)
{
    return starpu_task_wait_for_all();
}

void nnt_mpi_register(nnt_ctx *ctx, starpu_data_handle_t h, int owner)
{
    if (!ctx->mpi)
        return;
    pthread_mutex_lock(&ctx->lock);
    starpu_mpi_tag_t tag = (starpu_mpi_tag_t)ctx->next_tag++;
    pthread_mutex_unlock(&ctx->lock);
    starpu_mpi_data_register(h, tag, owner);
}

void nnt_mpi_share(nnt_ctx *ctx, starpu_data_handle_t h, int owner)
{
    if (!ctx->mpi)
        return;
    for (int r = 0; r < ctx->nranks; r++)
        if (r != owner)
            starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, h, r, NULL, NULL);
}

void nnt_mpi_forget_copies(nnt_ctx *ctx, starpu_data_handle_t h)
{
    if (ctx->mpi)
        starpu_mpi_cache_flush(MPI_COMM_WORLD, h);
}

void nnt_mpi_receive_wait(nnt_ctx *ctx, starpu_data_handle_t h, int to)
{
    if (!ctx->mpi)
        return;
    if (ctx->rank == to)
        starpu_mpi_get_data_on_node(MPI_COMM_WORLD, h, to);
    else if (ctx->rank == starpu_mpi_data_get_rank(h))
        starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, h, to, NULL, NULL);
}

void nnt_mpi_migrate(nnt_ctx *ctx, starpu_data_handle_t h, int rank, int keep)
{
    if (!ctx->mpi)
        return;
    if (keep)
        starpu_mpi_data_migrate(MPI_COMM_WORLD, h, rank);
    else {   /* about to be overwritten (maybe holding no data: a dropped gradient) */
        /* a copy that rank received earlier goes first: StarPU-MPI would otherwise
         * invalidate it (its cache entry) after the task that writes it there */
        starpu_mpi_cache_flush(MPI_COMM_WORLD, h);
        starpu_mpi_data_set_rank(h, rank);
    }
}

/* Register one handle per rank, owned by it (home: bufs[r] of sizes[r] bytes, or of size
 * bytes when sizes is NULL; none when bufs[r] is NULL), bring each to rank 0 (blocking; the
 * others do nothing for it) and unregister them, which leaves rank 0's buffers filled. */
static void bring_to_root(nnt_ctx *ctx, void **bufs, const int64_t *sizes, int64_t size)
{
    int n = ctx->nranks;
    starpu_data_handle_t h[n];
    memset(h, 0, sizeof h);
    for (int r = 0; r < n; r++) {
        starpu_vector_data_register(&h[r], bufs[r] ? STARPU_MAIN_RAM : -1,
                                    (uintptr_t)bufs[r], (uint32_t)(sizes ? sizes[r] : size), 1);
        nnt_mpi_register(ctx, h[r], r);
    }
    for (int r = 1; r < n; r++)
        starpu_mpi_get_data_on_node(MPI_COMM_WORLD, h[r], 0);
    for (int r = 0; r < n; r++)
        starpu_data_unregister(h[r]);
}

int nnt_mpi_gather(nnt_ctx *ctx, const void *mine, int64_t len, char **all, int64_t *offsets)
{
    int n = ctx->nranks, me = ctx->rank;
    int64_t lens[n];
    void *bufs[n];
    for (int r = 0; r < n; r++) {   /* first the lengths */
        lens[r] = r == me ? len : 0;
        bufs[r] = (r == me || me == 0) ? (void *)&lens[r] : NULL;
    }
    bring_to_root(ctx, bufs, NULL, sizeof lens[0]);
    *all = NULL;
    offsets[0] = 0;
    for (int r = 0; r < n; r++)
        offsets[r + 1] = offsets[r] + (me == 0 ? lens[r] : 0);
    char *copy = me == 0 ? malloc((size_t)offsets[n]) : NULL;
    for (int r = 0; r < n; r++) {   /* then the bytes, each of its own length */
        if (r == me) {
            bufs[r] = (void *)(uintptr_t)mine;
        } else if (me == 0) {
            bufs[r] = copy ? copy + offsets[r] : NULL;   /* NULL: StarPU allocates */
        } else {
            bufs[r] = NULL;
            lens[r] = 1;   /* a placeholder: this rank takes no part in r's transfer */
        }
    }
    bring_to_root(ctx, bufs, lens, 0);
    if (me == 0 && !copy)
        return nnt_fail(ctx, NNT_E_NOMEM, "out of host memory gathering %lld bytes from the "
                        "ranks", (long long)offsets[n]);
    if (me == 0)
        memcpy(copy, mine, (size_t)len);
    *all = copy;
    return NNT_OK;
}

/* Every rank's buffer (owner: rank 0, whose values it holds) filled with rank 0's values:
 * StarPU-MPI sends them to each other rank in turn, the ranks calling alike. */
static void broadcast_from_root(nnt_ctx *ctx, void *buf, int64_t size)
{
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)buf, (uint32_t)size, 1);
    nnt_mpi_register(ctx, h, 0);
    for (int r = 1; r < ctx->nranks; r++)
        starpu_mpi_get_data_on_node(MPI_COMM_WORLD, h, r);
    starpu_data_unregister(h);
}

int nnt_mpi_max(nnt_ctx *ctx, int64_t *values, int n)
{
    char *all = NULL;
    int64_t offsets[ctx->nranks + 1];
    int rc = nnt_mpi_gather(ctx, values, (int64_t)n * (int64_t)sizeof *values, &all, offsets);
    if (ctx->rank == 0 && !rc)
        for (int r = 1; r < ctx->nranks; r++)
            for (int i = 0; i < n; i++) {
                int64_t v;
                memcpy(&v, all + offsets[r] + (int64_t)i * (int64_t)sizeof v, sizeof v);
                if (v > values[i])
                    values[i] = v;
            }
    free(all);
    /* (rank 0 out of memory for the gather: its own values go out, every rank still
     * taking part; its error is returned there) */
    broadcast_from_root(ctx, values, (int64_t)n * (int64_t)sizeof *values);
    return rc;
}

/* The task runs on the rank that owns the tile it writes (StarPU-MPI sends it the tiles it
 * reads and sends written tiles back to other owners); the other ranks only take part in
 * those transfers, and free the argument copy the task would have owned. */
int nnt_mpi_submit(nnt_ctx *ctx, struct starpu_codelet *cl, int nbuf,
                   const struct starpu_data_descr *bufs, void *args, size_t args_size,
                   int *submit_rc)
{
    *submit_rc = 0;
    struct starpu_task *task = starpu_mpi_task_build(MPI_COMM_WORLD, cl, STARPU_DATA_MODE_ARRAY,
                                                     bufs, nbuf, STARPU_CL_ARGS, args,
                                                     args_size, 0);
    if (task) {
        /* StarPU-MPI's build marks every argument for freeing; the hook's callback argument
         * is the task itself */
        task->callback_arg_free = 0;
        task->prologue_callback_arg_free = 0;
        task->prologue_callback_pop_arg_free = 0;
        task->priority = nnt_task_priority(ctx, nbuf, bufs);
        nnt_stats_task_hook(task);
        *submit_rc = starpu_task_submit(task);
        if (*submit_rc != 0) {
            task->destroy = 0;
            starpu_task_destroy(task);
        }
    } else {
        free(args);
    }
    /* args is not read again: the call only decodes the buffers */
    return starpu_mpi_task_post_build(MPI_COMM_WORLD, cl, STARPU_DATA_MODE_ARRAY, bufs, nbuf,
                                      STARPU_CL_ARGS, args, args_size, 0);
}

#else /* !NNT_HAVE_MPI */

int nnt_mpi_agree(const nnt_ctx_options *o, int local_rc, int *rank, int *nranks,
                  int64_t *ram_mib, int *node_ranks)
{
    (void)o;
    (void)ram_mib;
    *rank = 0;
    *nranks = 1;
    *node_ranks = 1;
    if (local_rc)
        return local_rc;
    return nnt_fail(NULL, NNT_E_UNSUPPORTED, "nnt_ctx_create: mpi = 1 but this nnt was built "
                    "without StarPU-MPI (install libopenmpi-dev and configure --with-mpi)");
}

int nnt_mpi_init_runtime(struct starpu_conf *conf)
{
    (void)conf;
    return -1;
}

void nnt_mpi_shutdown_runtime(void) {}

int nnt_mpi_wait_all(void)
{
    return -1;
}

void nnt_mpi_register(nnt_ctx *ctx, starpu_data_handle_t h, int owner)
{
    (void)ctx, (void)h, (void)owner;
}

void nnt_mpi_share(nnt_ctx *ctx, starpu_data_handle_t h, int owner)
{
    (void)ctx, (void)h, (void)owner;
}

void nnt_mpi_forget_copies(nnt_ctx *ctx, starpu_data_handle_t h)
{
    (void)ctx, (void)h;
}

void nnt_mpi_receive_wait(nnt_ctx *ctx, starpu_data_handle_t h, int to)
{
    (void)ctx, (void)h, (void)to;
}

void nnt_mpi_migrate(nnt_ctx *ctx, starpu_data_handle_t h, int rank, int keep)
{
    (void)ctx, (void)h, (void)rank, (void)keep;
}

int nnt_mpi_gather(nnt_ctx *ctx, const void *mine, int64_t len, char **all, int64_t *offsets)
{
    (void)ctx, (void)mine, (void)len, (void)offsets;
    *all = NULL;
    return NNT_E_UNSUPPORTED;
}

int nnt_mpi_max(nnt_ctx *ctx, int64_t *values, int n)
{
    (void)ctx, (void)values, (void)n;
    return NNT_OK;   /* one process: its values are the maximum */
}

int nnt_mpi_submit(nnt_ctx *ctx, struct starpu_codelet *cl, int nbuf,
                   const struct starpu_data_descr *bufs, void *args, size_t args_size,
                   int *submit_rc)
{
    (void)ctx, (void)cl, (void)nbuf, (void)bufs, (void)args_size;
    free(args);
    *submit_rc = -1;
    return -1;
}

#endif
