/* SPDX-License-Identifier: MIT */
/* The RAM of tiles: StarPU's allocation hooks (starpu_malloc_set_hooks).
 *
 * StarPU 1.3.10 frees a tile's RAM as soon as the tile goes (unregistered, or evicted under a
 * budget) and allocates the next one afresh; it keeps freed RAM for reuse (its memchunk cache)
 * only under a RAM limit (src/datawizard/memalloc.c, _starpu_request_mem_chunk_removal: RAM
 * is freed at once while STARPU_LIMIT_CPU_MEM is unset). With glibc's allocator each large
 * block is either its own mapping (MALLOC_MMAP_THRESHOLD_ low: every new tile is mapped and
 * faulted in page by page, zeroed by the kernel) or a piece of a heap (glibc's own dynamic
 * threshold: the worker threads' heaps of 64 MiB are unmapped when they empty and mapped
 * again for the next tile, so the tiles are faulted in again too; or the heap keeps what was
 * freed and the process's resident memory outgrows a budget: 5.4 GiB for 4).
 *
 * These hooks map each block of mapped_min bytes or more on its own and, when StarPU
 * frees it, keep it for the next allocation of the same size, so the next tile of that size
 * gets its pages: no fault, no zeroing. Smaller blocks go to malloc, as StarPU's own path
 * does. Two ways to bound what is kept:
 *
 *  - Under a swap (a RAM budget that StarPU enforces by evicting tiles): the blocks kept stay
 *    under a cap (1/32 of the budget, at most 512 MiB; beyond it the oldest is unmapped). The
 *    cap is taken from the budget (StarPU counts it as used from the start, and the library's
 *    budget checks use what is left), so the tiles and the blocks kept together stay within
 *    it. Measured with a 0.9B model under a 4 GiB budget (bench/RESULTS-ooc.md, 2026-11-29):
 *    61 % of the blocks reused, 6.2 M page faults instead of 9.4 M, system time 43-49 s
 *    instead of 62-66 s, steps 1.11-1.18x the in-RAM step instead of 1.19-1.27x, the same
 *    resident memory. A cap of 1/8 reused 80 % of the blocks but evicted more (no faster);
 *    blocks aligned to 2 MiB and advised as huge pages took faults from 6.2 M to 0.17 M but
 *    not the time (the kernel still zeroes every new page).
 *  - In RAM (no swap): a training step frees and allocates its activations' and gradients'
 *    tiles again every step (several GiB for a 1B model), more than a fixed cap holds, and a
 *    cap too small to hold one step's tiles reuses none of them (each is unmapped before its
 *    size comes again). So the blocks are kept while the blocks handed out and kept together
 *    stay under the budget and under 9/8 of the most handed out at once (the peak; the
 *    eighth more because the scheduler does not free and allocate in the same order every
 *    step: with the peak alone a Llama-3.2-1B LoRA step still mapped 5-8 blocks anew, whose
 *    first writers took 25 ms instead of 1), and at most a quarter of the memory StarPU uses
 *    for RAM. A passing peak is forgotten where the library knows one ended (nnt_ram_settle:
 *    after a model's initialisation, whose frozen matrices are written in fp32 and
 *    converted to bf16 one by one, blocks of sizes the steps do not ask for). Measured on
 *    Llama-3.2-1B LoRA steps (bench/RESULTS-lora.md, 2026-11-30): no page fault a step
 *    instead of about 42,000, steps 0.98-1.00x, peak RSS 2-7 % lower. Tried and not kept:
 *    advising each kept block MADV_FREE (the kernel could take its pages back under memory
 *    pressure): each advice flushes the other cores' TLBs, and the README's GPT-2 steps of
 *    about 37 ms took 42-48 ms with it.
 *
 * Installed only where they stand in for plain malloc: no CUDA worker (StarPU pins RAM for
 * GPUs with cudaHostAlloc) and one NUMA node (StarPU binds with hwloc otherwise); after
 * starpu_init, so a block StarPU allocated before is not in the registry and goes to free(),
 * as StarPU's own path would; removed after starpu_shutdown, which frees every tile.
 * NNT_RAM_HOOKS=0 leaves StarPU's allocator. */
#define _DEFAULT_SOURCE   /* MAP_ANONYMOUS */
#include "ctx_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <starpu.h>

/* Smaller blocks go to malloc: 1 MiB under a swap (as measured there); in RAM 128 KiB,
 * glibc's default mmap threshold. glibc raises that threshold (and its trim threshold) only
 * when it frees a block it mapped, so once every block of 1 MiB or more came from here, its
 * blocks of 128 KiB to 1 MiB were each mapped and unmapped again: README's GPT-2 (tiles of
 * 0.1 to 1.5 MiB) then took 3,800 page faults a step and 1.1x the step time. */
#define NNT_RAM_MAPPED_MIN_SWAP ((size_t)1 << 20)
#define NNT_RAM_MAPPED_MIN_RAM ((size_t)128 << 10)
#define NBUCKETS 4096                            /* the registry's hash buckets       */
#define MAX_KEPT 1024                            /* freed blocks kept at most         */

struct block {
    void *ptr;    /* handed out: off bytes into its mapping                     */
    size_t len;   /* the bytes asked for, rounded up to whole pages              */
    size_t off;   /* the mapping is len + a page from ptr - off                   */
    struct block *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct block *live[NBUCKETS];   /* blocks handed to StarPU, by address      */
static struct block kept[MAX_KEPT];    /* freed blocks, oldest first               */
static int nkept;
static size_t kept_bytes, kept_cap;
static size_t ram_limit;                /* in RAM: the budget; blocks kept beyond its room go */
static size_t live_bytes, peak_bytes;   /* mapped blocks handed out now, and at most
                                           since the start or the last nnt_ram_settle   */
static size_t most_bytes;               /* ... at most since the start                   */
static int in_ram;                      /* no swap: kept under 9/8 of the peak          */
static unsigned mapped_count;           /* the offsets of new mappings cycle with it    */
static size_t mapped_min = NNT_RAM_MAPPED_MIN_SWAP;   /* smaller blocks: malloc            */
static size_t page_size = 4096;         /* sysconf(_SC_PAGESIZE), read at install      */
static int installed;
static nnt_ram_stats counts;

static size_t bucket(const void *p)
{
    uintptr_t v = (uintptr_t)p >> 12;
    return (size_t)((v ^ (v >> 13)) % NBUCKETS);
}

static size_t page_round(size_t n)
{
    return (n + page_size - 1) / page_size * page_size;
}

/* A fresh mapping for len bytes, off bytes into it (a multiple of 64 below a page), NULL
 * when the system has none. Blocks at the same offset in their pages would make a kernel
 * that streams several of them at once (y = silu(gate) up) store and load at addresses
 * 4 KiB apart, which x86 cores stall on (4K aliasing): the offsets cycle through the 64
 * cache lines of a page, in steps of 5 lines. */
static void *map_block(size_t len, size_t off)
{
    char *p = mmap(NULL, len + page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p + off;
}

static void unmap_block(void *p, size_t len, size_t off)
{
    munmap((char *)p - off, len + page_size);
}

/* The most recent kept block of len bytes, taken out of the kept list into *b; 0 when none. */
static int take_kept(size_t len, struct block *b)
{
    for (int i = nkept - 1; i >= 0; i--) {
        if (kept[i].len != len)
            continue;
        b->ptr = kept[i].ptr;
        b->off = kept[i].off;
        memmove(&kept[i], &kept[i + 1], (size_t)(nkept - 1 - i) * sizeof kept[0]);
        nkept--;
        kept_bytes -= len;
        return 1;
    }
    return 0;
}

/* Unmap the oldest kept block. */
static void drop_oldest(void)
{
    unmap_block(kept[0].ptr, kept[0].len, kept[0].off);
    kept_bytes -= kept[0].len;
    memmove(&kept[0], &kept[1], (size_t)(nkept - 1) * sizeof kept[0]);
    nkept--;
}

static int ram_malloc(unsigned node, void **out, size_t dim, int flags)
{
    (void)node;
    (void)flags;
    if (dim < mapped_min) {
        *out = malloc(dim ? dim : 1);
        return *out ? 0 : -ENOMEM;
    }
    size_t len = page_round(dim);
    struct block *b = malloc(sizeof *b);
    if (!b) {
        *out = NULL;
        return -ENOMEM;
    }
    pthread_mutex_lock(&lock);
    int reused = take_kept(len, b);
    if (!reused)
        b->off = 64 * ((mapped_count++ * 5) % 64);
    pthread_mutex_unlock(&lock);
    if (!reused && !(b->ptr = map_block(len, b->off))) {
        /* no mapping (out of memory, or of mappings: vm.max_map_count): malloc's, which
         * ram_free finds in no record and frees */
        free(b);
        *out = malloc(dim);
        return *out ? 0 : -ENOMEM;
    }
    void *p = b->ptr;
    b->len = len;
    pthread_mutex_lock(&lock);
    live_bytes += len;
    if (live_bytes > peak_bytes)
        peak_bytes = live_bytes;
    if (live_bytes > most_bytes)
        most_bytes = live_bytes;
    while (in_ram && nkept > 0 && (live_bytes + kept_bytes > ram_limit ||
                                   live_bytes + kept_bytes > peak_bytes + peak_bytes / 8))
        drop_oldest();
    size_t k = bucket(p);
    b->next = live[k];
    live[k] = b;
    counts.blocks++;
    if (reused)
        counts.reused++;
    else
        counts.mapped++;
    pthread_mutex_unlock(&lock);
    *out = p;
    return 0;
}

/* The registry's record of p, unlinked; NULL when p is not one of these blocks. */
static struct block *unlink_live(void *p)
{
    for (struct block **at = &live[bucket(p)]; *at; at = &(*at)->next) {
        if ((*at)->ptr != p)
            continue;
        struct block *b = *at;
        *at = b->next;
        return b;
    }
    return NULL;
}

static int ram_free(unsigned node, void *p, size_t dim, int flags)
{
    (void)node;
    (void)dim;
    (void)flags;
    if (!p)
        return 0;
    pthread_mutex_lock(&lock);
    struct block *b = unlink_live(p);
    if (!b) {
        pthread_mutex_unlock(&lock);
        free(p);   /* malloc'ed here, or by StarPU before the hooks */
        return 0;
    }
    size_t len = b->len, off = b->off;
    free(b);
    live_bytes -= len;
    if (len > kept_cap) {
        pthread_mutex_unlock(&lock);
        unmap_block(p, len, off);
        return 0;
    }
    while (nkept > 0 && (nkept == MAX_KEPT || kept_bytes + len > kept_cap))
        drop_oldest();
    kept[nkept].ptr = p;
    kept[nkept].len = len;
    kept[nkept].off = off;
    nkept++;
    kept_bytes += len;
    pthread_mutex_unlock(&lock);
    return 0;
}

int ctx_ram_install(int64_t budget, int swap, const char **why_not)
{
    const char *v = getenv("NNT_RAM_HOOKS");
    if (v && !strcmp(v, "0")) {
        *why_not = "NNT_RAM_HOOKS=0";
        return 0;
    }
    if (starpu_cuda_worker_get_count() > 0) {
        *why_not = "CUDA workers (RAM pinned by StarPU)";
        return 0;
    }
    if (starpu_memory_nodes_get_numa_count() > 1) {
        *why_not = "several NUMA nodes (RAM bound by StarPU)";
        return 0;
    }
    pthread_mutex_lock(&lock);
    /* under a swap 1/32 of the budget, 512 MiB at most; in RAM a quarter of it (and the
     * peak); none where it cannot hold one mapped block */
    int64_t cap = budget > 0 ? budget / (swap ? 32 : 4) : 0;
    if (swap && cap > ((int64_t)512 << 20))
        cap = (int64_t)512 << 20;
    in_ram = !swap;
    mapped_min = swap ? NNT_RAM_MAPPED_MIN_SWAP : NNT_RAM_MAPPED_MIN_RAM;
    kept_cap = cap < (int64_t)mapped_min ? 0 : (size_t)cap;
    ram_limit = budget > 0 ? (size_t)budget : SIZE_MAX;
    live_bytes = peak_bytes = most_bytes = 0;
    long page = sysconf(_SC_PAGESIZE);
    page_size = page > 0 ? (size_t)page : 4096;
    memset(&counts, 0, sizeof counts);
    installed = 1;
    pthread_mutex_unlock(&lock);
    /* under a swap the blocks kept live inside the budget: StarPU counts their room as used */
    if (kept_cap && swap)
        starpu_memory_allocate(STARPU_MAIN_RAM, kept_cap, STARPU_MEMORY_OVERFLOW);
    starpu_malloc_set_hooks(ram_malloc, ram_free);
    if (swap)
        nnt_log(NNT_LOG_INFO, "RAM of tiles under the swap: blocks of %zu KiB+ mapped on their "
                "own, a freed one reused for the next of its size (%.1f MiB of the budget kept "
                "for that)", mapped_min >> 10, (double)kept_cap / 1048576.0);
    else
        nnt_log(NNT_LOG_INFO, "RAM of tiles: blocks of %zu KiB+ mapped on their own, a freed "
                "one reused for the next of its size (kept under 9/8 of the peak of the blocks "
                "in use)", mapped_min >> 10);
    return 1;
}

void ctx_ram_remove(void)
{
    if (!installed)
        return;
    nnt_log(NNT_LOG_INFO, "RAM of tiles: %lld blocks of %zu KiB+ handed out, %lld newly mapped, "
            "%lld reused; at most %.1f MiB handed out at once", (long long)counts.blocks,
            mapped_min >> 10,
            (long long)counts.mapped, (long long)counts.reused, (double)most_bytes / 1048576.0);
    starpu_malloc_set_hooks(NULL, NULL);   /* (StarPU stopped: its budget went with it) */
    pthread_mutex_lock(&lock);
    while (nkept > 0)
        drop_oldest();
    installed = 0;
    kept_cap = 0;
    in_ram = 0;
    pthread_mutex_unlock(&lock);
}

void nnt_ram_settle(void)
{
    pthread_mutex_lock(&lock);
    if (installed && in_ram) {
        peak_bytes = live_bytes;
        while (nkept > 0 && kept_bytes > peak_bytes / 8)   /* (the rule of ram_malloc) */
            drop_oldest();
    }
    pthread_mutex_unlock(&lock);
}

size_t ctx_ram_kept_cap(void)
{
    return in_ram ? 0 : kept_cap;
}

void nnt_ram_stats_get(nnt_ram_stats *out)
{
    pthread_mutex_lock(&lock);
    *out = counts;
    out->kept_bytes = (int64_t)kept_bytes;
    out->live_bytes = (int64_t)live_bytes;
    out->peak_bytes = (int64_t)peak_bytes;
    pthread_mutex_unlock(&lock);
}
