/* SPDX-License-Identifier: MIT */
/* What StarPU 1.3 allocates for a tile (lib/ctx_alloc.c; that file's head comment gives
 * StarPU's rule and the bound). Needs nothing but <stdint.h>: the tests compile it alone. */
#ifndef NNT_CTX_ALLOC_H
#define NNT_CTX_ALLOC_H

#include <stdint.h>

/* With CUDA workers, tiles of at most NNT_STARPU_CHUNK_ALLOC_MAX bytes on a GPU, and in RAM
 * when it is pinned, are rounded up to blocks of NNT_STARPU_BLOCK and placed in chunks of
 * NNT_STARPU_CHUNK, each counted whole against the budget; up to NNT_STARPU_CHUNKS_KEPT
 * empty chunks stay allocated. */
#define NNT_STARPU_CHUNK ((int64_t)32 << 20)
#define NNT_STARPU_CHUNK_ALLOC_MAX (NNT_STARPU_CHUNK / 8)
#define NNT_STARPU_BLOCK ((int64_t)16 << 10)
#define NNT_STARPU_CHUNKS_KEPT 4
/* 1 when an allocation of bytes goes into a chunk (where chunks are used). */
int nnt_alloc_suballocated(int64_t bytes);
/* The bytes an allocation of bytes takes: rounded up to whole blocks (at least one) when
 * chunked and suballocated, else bytes. */
int64_t nnt_alloc_bytes(int64_t bytes, int chunked);
/* The chunks that hold small bytes of rounded suballocations made without frees (at most):
 * ceil(small / (7/8 of a chunk)). */
int64_t nnt_alloc_chunks(int64_t small);
/* What StarPU counts against a budget for big bytes of allocations over the chunk limit and
 * small bytes of rounded suballocations, with kept empty chunks besides (at most). */
int64_t nnt_alloc_need(int64_t big, int64_t small, int64_t kept);
/* The empty chunks StarPU may still hold when the suballocations need chunks and needed
 * peak_chunks at most so far: at most NNT_STARPU_CHUNKS_KEPT. */
int64_t nnt_alloc_kept(int64_t chunks, int64_t peak_chunks);

#endif
