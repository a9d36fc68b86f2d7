/* SPDX-License-Identifier: MIT */
/* What StarPU 1.3 really allocates for a tile, so that the memory budgets count that and not
 * only the tiles' bytes (issue 42: a RAM budget with CUDA workers left StarPU waiting forever).
 *
 * StarPU 1.3.10's allocator, src/datawizard/malloc.c:
 *  - RAM is allocated pinned (cudaHostAlloc) when the machine has CUDA workers and
 *    STARPU_DISABLE_PINNING is not a positive number (_starpu_malloc_should_pin:
 *    STARPU_MALLOC_PINNED is in the main memory's default flags, set by _starpu_malloc_init);
 *    GPU memory always with cudaMalloc.
 *  - Allocations of at most CHUNK_ALLOC_MAX = CHUNK_SIZE / 8 = 4 MiB on a GPU, and in RAM
 *    when pinned, are suballocated (_starpu_malloc_should_suballoc): rounded up to blocks of
 *    CHUNK_ALLOC_MIN = 16 KiB and placed first-fit in chunks of CHUNK_SIZE = 32 MiB. A new
 *    chunk is allocated, and counted whole against the node's budget (STARPU_LIMIT_*_MEM, by
 *    starpu_memory_allocate in _starpu_malloc_on_node), only when no chunk has a free run of
 *    blocks long enough (starpu_malloc_on_node_flags).
 *  - A chunk that becomes empty stays allocated, and counted, while fewer than CHUNKS_NFREE = 4
 *    others are empty (starpu_free_on_node_flags); StarPU's reclaiming under a budget frees
 *    tiles (its memchunk cache, then tiles with a copy elsewhere), never those chunks.
 *  - Larger allocations are made, and counted, at their size.
 * When what it must allocate exceeds the budget and nothing can be evicted, StarPU waits for
 * memory that never comes free (_starpu_allocate_interface answers -ENOMEM, the request is
 * retried): a hang, not an error. nnt refuses such budgets instead (lib/ctx_tensors.c,
 * lib/codelets/submit.c), giving the smallest budget that holds the tiles.
 *
 * The bound used for the chunks: without frees, a chunk is passed over only when its free
 * tail is shorter than the request, at most 256 blocks, so every chunk but the last holds
 * more than 2048 - 256 = 1792 of its 2048 blocks, 7/8 of it: ceil(small / 28 MiB) chunks
 * hold small bytes of rounded suballocations. Weights, gradients and optimizer moments are
 * allocated once for a run; the activations of a fixed batch are freed and allocated again
 * every step at the same sizes (on a GPU through StarPU's memchunk cache; in RAM StarPU frees
 * them at once unless STARPU_LIMIT_CPU_MEM is set, see lib/ctx_ram.c); frees followed by
 * allocations of other sizes can fragment the chunks beyond the bound. */
#include "ctx_alloc.h"

int nnt_alloc_suballocated(int64_t bytes)
{
    return bytes <= NNT_STARPU_CHUNK_ALLOC_MAX;
}

int64_t nnt_alloc_bytes(int64_t bytes, int chunked)
{
    if (!chunked || !nnt_alloc_suballocated(bytes))
        return bytes;
    int64_t blocks = (bytes + NNT_STARPU_BLOCK - 1) / NNT_STARPU_BLOCK;
    return (blocks > 0 ? blocks : 1) * NNT_STARPU_BLOCK;   /* never less than one block */
}

int64_t nnt_alloc_chunks(int64_t small)
{
    const int64_t filled = NNT_STARPU_CHUNK - NNT_STARPU_CHUNK_ALLOC_MAX;   /* 28 MiB */
    return small > 0 ? (small + filled - 1) / filled : 0;
}

int64_t nnt_alloc_need(int64_t big, int64_t small, int64_t kept)
{
    return big + (nnt_alloc_chunks(small) + kept) * NNT_STARPU_CHUNK;
}

int64_t nnt_alloc_kept(int64_t chunks, int64_t peak_chunks)
{
    int64_t empty = peak_chunks - chunks;
    if (empty < 0)
        return 0;
    return empty < NNT_STARPU_CHUNKS_KEPT ? empty : NNT_STARPU_CHUNKS_KEPT;
}
