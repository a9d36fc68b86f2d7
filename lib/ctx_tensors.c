/* SPDX-License-Identifier: MIT */
/* The context's registry of live tensors and the memory-budget checks made when a tensor is
 * added (tiles counted per rank for MPI distributions, the RAM budget or the swap as the
 * limit, the release window of gathered weights); at destroy, the tensors left are orphaned. */
#include "ctx_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Add sign x t's tiles to the context's counts (lock held), each as StarPU allocates it in
 * RAM (nnt_alloc_bytes: rounded up to 16 KiB blocks where it suballocates pinned RAM). */
static void count_tiles(nnt_ctx *ctx, const nnt_tensor *t, int sign)
{
    int per_rank = t->stays || t->released;
    int64_t bytes = 0, small = 0;
    if (!ctx->ram_chunked && !per_rank) {
        bytes = nnt_tensor_bytes(t);
    } else {
        for (int64_t i = 0; i < t->ntiles; i++) {
            int64_t b = nnt_alloc_bytes(nnt_tensor_tile_bytes(t, i), ctx->ram_chunked);
            bytes += b;
            if (ctx->ram_chunked && nnt_alloc_suballocated(b))
                small += b;
            if (per_rank)
                *(t->stays ? &ctx->ranks[t->tiles[i].owner].stays
                           : &ctx->ranks[t->tiles[i].owner].released) += sign * b;
        }
    }
    ctx->tile_bytes += sign * bytes;
    ctx->small_bytes += sign * small;
    if (!per_rank)
        return;
    *(t->stays ? &ctx->stays_bytes : &ctx->released_bytes) += sign * bytes;
    if (sign > 0 && bytes > ctx->largest_stays)
        ctx->largest_stays = bytes;
}

/* The most bytes of tiles one rank may come to hold (lock held): in one process, or when
 * rank 0 owns everything, all of them; else, for the rank where it is largest, its own tiles
 * of the tensors that stay on their owners (optimizer moments; gradients under
 * NNT_DIST_SHARDED) or that the ranks release after use (weights under release_weights),
 * every tile of the others (it may receive a copy of any tile it reads: weights, rows), the
 * largest tensor that stays or is released (a host read brings one whole to every rank),
 * and the weights a forward or backward gathers at once (the release window; at most the
 * released tiles other ranks own). */
static int64_t most_held(const nnt_ctx *ctx)
{
    if (!ctx->mpi || ctx->nranks < 2 || ctx->distribution == NNT_DIST_ROOT)
        return ctx->tile_bytes;
    int64_t most = 0;
    for (int r = 0; r < ctx->nranks; r++) {
        int64_t others = ctx->released_bytes - ctx->ranks[r].released;   /* it may receive */
        int64_t held = ctx->ranks[r].stays + ctx->ranks[r].released +
                       (ctx->release_window < others ? ctx->release_window : others);
        if (held > most)
            most = held;
    }
    return ctx->tile_bytes - ctx->stays_bytes - ctx->released_bytes + most +
           ctx->largest_stays;
}

/* "" in one process; else what most_held counted, for a message */
static const char *held_counted(const nnt_ctx *ctx)
{
    if (most_held(ctx) == ctx->tile_bytes)
        return ctx->mpi ? ", every rank's tiles counted" : "";
    if (ctx->release_weights)
        return ctx->distribution == NNT_DIST_SHARDED
                   ? ", on the rank that may hold the most: its share of the weights, "
                     "gradients and optimizer moments, the weights of two layers gathered "
                     "at a time, every other tile it may read"
                   : ", on the rank that may hold the most: its share of the weights and "
                     "optimizer moments, the weights of two layers gathered at a time, every "
                     "other tile it may read";
    return ctx->distribution == NNT_DIST_SHARDED
               ? ", on the rank that may hold the most: its share of the gradients and "
                 "optimizer moments, every other tile it may read"
               : ", on the rank that may hold the most: its share of the optimizer moments, "
                 "every other tile it may read";
}

/* The memory limit the budget checks hold to: the swap's size, else the RAM budget. */
static int64_t held_limit(const nnt_ctx *ctx)
{
    return ctx->swap_bytes > 0 ? ctx->swap_bytes : ctx->ram_budget;
}

/* The chunks StarPU may hold for the suballocated part of held bytes (lock held). */
static int64_t held_chunks(const nnt_ctx *ctx, int64_t held)
{
    return nnt_alloc_chunks(ctx->small_bytes < held ? ctx->small_bytes : held);
}

/* What StarPU may come to count against the limit for the tiles one rank may hold (lock
 * held): most_held, and where StarPU suballocates pinned RAM (without a swap, which it does
 * not chunk) its suballocations in whole chunks plus the empty chunks it keeps
 * (lib/ctx_alloc.c). Under MPI the suballocated part is taken as large as it can be. */
static int64_t held_need(const nnt_ctx *ctx)
{
    int64_t held = most_held(ctx);
    if (!ctx->ram_chunked || ctx->swap_bytes > 0)
        return held;
    int64_t small = ctx->small_bytes < held ? ctx->small_bytes : held;
    int64_t chunks = nnt_alloc_chunks(small);
    int64_t peak = ctx->peak_chunks > chunks ? ctx->peak_chunks : chunks;
    return nnt_alloc_need(held - small, small, nnt_alloc_kept(chunks, peak));
}

/* After tiles were added within the limit: the chunks they take may be a new peak. */
static void note_peak(nnt_ctx *ctx)
{
    int64_t chunks = held_chunks(ctx, most_held(ctx));
    if (ctx->ram_chunked && chunks > ctx->peak_chunks)
        ctx->peak_chunks = chunks;
}

static int over_budget(nnt_ctx *ctx, const char *fn, double more, double already, double need)
{
    const double mib = 1024.0 * 1024.0;
    int chunks = ctx->ram_chunked && ctx->swap_bytes == 0;
    char limit[160] = "RAM budget", shared[64] = "";
    if (ctx->node_ranks > 1)
        snprintf(shared, sizeof shared, ", shared by the %d ranks on this node",
                 ctx->node_ranks);
    if (ctx->swap_bytes > 0)
        snprintf(limit, sizeof limit, "disk swap");
    else if (ctx->ram_budget_default)
        snprintf(limit, sizeof limit, "default RAM budget (15/16 of the memory available when "
                 "the context started%s)", shared);
    return nnt_fail(ctx, NNT_E_NOMEM, "%s: %.1f MiB more of tensors (%.1f MiB already%s) "
                    "exceed the %s of %.0f MiB: the tensors so far with them need at least "
                    "%.0f MiB%s; give a %s", fn,
                    more / mib, already / mib, held_counted(ctx), limit,
                    (double)held_limit(ctx) / mib, ceil(need / mib),
                    chunks ? " (with CUDA workers StarPU pins RAM and puts tiles of up to 4 MiB "
                             "in 16 KiB blocks of 32 MiB chunks, each counted whole, keeping up "
                             "to 4 empty ones)" : "",
                    ctx->swap_bytes > 0 ? "larger swap_mib" : "larger mem_cpu_mib or a "
                    "swap_dir");
}

int nnt_ctx_set_release_window(nnt_ctx *ctx, int64_t bytes, const char *fn)
{
    pthread_mutex_lock(&ctx->lock);
    int64_t before = held_need(ctx), old = ctx->release_window;
    ctx->release_window = bytes;
    int64_t after = held_need(ctx);
    if (ctx->ram_budget > 0 && bytes > old && after > held_limit(ctx)) {
        ctx->release_window = old;
        pthread_mutex_unlock(&ctx->lock);
        return over_budget(ctx, fn, (double)(after - before), (double)before, (double)after);
    }
    note_peak(ctx);
    pthread_mutex_unlock(&ctx->lock);
    return NNT_OK;
}

/* Count t's tiles, or refuse them when they exceed the limit (lock held; released on
 * failure). */
static int count_within_limit(nnt_ctx *ctx, nnt_tensor *t, const char *fn)
{
    int64_t before = held_need(ctx);
    count_tiles(ctx, t, 1);
    int64_t after = held_need(ctx);
    if (ctx->ram_budget > 0 && after > held_limit(ctx)) {
        count_tiles(ctx, t, -1);
        pthread_mutex_unlock(&ctx->lock);
        /* StarPU would spin forever looking for memory to free: refuse instead. Under MPI
         * every rank takes the same decision (it counts every rank's tiles alike) */
        return over_budget(ctx, fn, (double)(after - before), (double)before, (double)after);
    }
    note_peak(ctx);
    return NNT_OK;
}

int nnt_ctx_add_tensor(nnt_ctx *ctx, nnt_tensor *t, const char *fn)
{
    pthread_mutex_lock(&ctx->lock);
    int rc = t->deferred ? NNT_OK : count_within_limit(ctx, t, fn);
    if (rc)
        return rc;
    ctx->deferred_tensors += t->deferred;
    ctx->deferred_bytes += t->deferred ? nnt_tensor_bytes(t) : 0;
    t->prev = NULL;
    t->next = ctx->tensors;
    if (ctx->tensors)
        ctx->tensors->prev = t;
    ctx->tensors = t;
    pthread_mutex_unlock(&ctx->lock);
    if (ctx->pack_keep && !t->deferred)
        nnt_gemm_kept_fit_room(ctx);   /* the room its tiles took from the kept packs */
    return NNT_OK;
}

int nnt_ctx_count_deferred(nnt_ctx *ctx, nnt_tensor *t, const char *fn)
{
    pthread_mutex_lock(&ctx->lock);
    int rc = t->deferred ? count_within_limit(ctx, t, fn) : NNT_OK;
    if (rc)
        return rc;
    ctx->deferred_tensors -= t->deferred;
    ctx->deferred_bytes -= t->deferred ? nnt_tensor_bytes(t) : 0;
    t->deferred = 0;
    pthread_mutex_unlock(&ctx->lock);
    return NNT_OK;
}

int nnt_ctx_has_deferred(nnt_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    int some = ctx->deferred_tensors > 0;
    pthread_mutex_unlock(&ctx->lock);
    return some;
}

int64_t nnt_ctx_ram_room(nnt_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    int64_t room = ctx->ram_budget > 0 && ctx->swap_bytes == 0
                       ? ctx->ram_budget - held_need(ctx) - ctx->deferred_bytes : INT64_MAX;
    pthread_mutex_unlock(&ctx->lock);
    return room;
}

void nnt_ctx_remove_tensor(nnt_ctx *ctx, nnt_tensor *t)
{
    pthread_mutex_lock(&ctx->lock);
    if (!t->deferred)
        count_tiles(ctx, t, -1);
    ctx->deferred_tensors -= t->deferred;
    ctx->deferred_bytes -= t->deferred ? nnt_tensor_bytes(t) : 0;
    ctx->owned_bytes -= t->owned_bytes;
    if (t->prev)
        t->prev->next = t->next;
    else
        ctx->tensors = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->prev = t->next = NULL;
    pthread_mutex_unlock(&ctx->lock);
}

/* Release the tiles of every tensor still alive; the handles stay valid but unusable. */
void ctx_orphan_tensors(nnt_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    nnt_tensor *t = ctx->tensors;
    ctx->tensors = NULL;
    ctx->tile_bytes = 0;
    ctx->small_bytes = 0;
    ctx->deferred_tensors = 0;
    ctx->deferred_bytes = 0;
    ctx->stays_bytes = 0;
    ctx->released_bytes = 0;
    ctx->release_window = 0;
    ctx->owned_bytes = 0;
    pthread_mutex_unlock(&ctx->lock);
    while (t) {
        nnt_tensor *next = t->next;
        nnt_gemm_kept_free(t);
        for (int64_t i = 0; i < t->ntiles; i++)
            starpu_data_unregister_no_coherency(t->tiles[i].handle);
        free(t->tiles);
        t->tiles = NULL;
        t->ctx = NULL;
        t->prev = t->next = NULL;
        t = next;
    }
}
