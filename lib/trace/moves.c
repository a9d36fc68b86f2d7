/* SPDX-License-Identifier: MIT */
/* Which tensors move: the bytes of each transfer between RAM and the disk swap or a GPU,
 * told apart by what the tile holds (weights, gradients, optimizer state, other tensors;
 * nnt_mem_stats's *_by arrays, NNT_MEM_*).
 *
 * StarPU counts transfers per bus only (starpu_bus_get_profiling_info). A tensor's tiles are
 * registered here with StarPU's vector interface whose copy method is wrapped: every
 * transfer of a vector goes through that one method (any_to_any, StarPU 1.3.10's
 * src/datawizard/interfaces/vector_interface.c; the disk driver calls it too,
 * src/drivers/disk/driver_disk.c), which is handed the interfaces of both nodes but not the
 * handle. The interface StarPU keeps for a handle on the main RAM node is allocated once, at
 * registration, so its address names the tile: a table maps it to the tile's kind. An
 * entry is added when the tile is registered and removed when StarPU frees the handle's
 * interfaces (the interface's unregister_data_handle, which StarPU calls just before: for a
 * temporary released with nnt_temp_release, once its tasks ran, StarPU moving its tiles
 * until then). A transfer whose tile is not in the table (the library's own tiles: packed B
 * tiles, partial sums) counts in no kind; nnt_ctx_mem_stats reports it under
 * NNT_MEM_INTERNAL as the bus counters' rest. So does a transfer to or from a second NUMA
 * node's RAM (StarPU with STARPU_USE_NUMA), whose interface is not the main RAM's.
 *
 * The interface id stays StarPU's vector id, so codelets, StarPU-MPI's datatypes and
 * StarPU's memory chunk reuse (which compares interface ids) treat the tiles as vectors. */
#include "../internal.h"
#include "trace.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 65536

struct entry {
    const void *iface;    /* the tile's interface on STARPU_MAIN_RAM */
    int kind;             /* NNT_MEM_*                              */
    struct entry *next;
};

enum { TO_DISK, FROM_DISK, TO_GPU, FROM_GPU, NDIRS };

static struct {
    pthread_mutex_t lock;
    struct entry *bucket[NBUCKETS];
    int64_t bytes[NDIRS][NNT_MEM_KINDS];
} mv = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t ops_once = PTHREAD_ONCE_INIT;
static struct starpu_data_interface_ops counted_ops;
static struct starpu_data_copy_methods counted_copy;
static int (*vector_any_to_any)(void *, unsigned, void *, unsigned, void *);

static size_t slot(const void *iface)
{
    uintptr_t v = (uintptr_t)iface >> 4;
    return (size_t)((v ^ (v >> 16) ^ (v >> 32)) % NBUCKETS);
}

/* The kind of the tile whose main-RAM interface is iface, -1 when unknown (mv.lock held). */
static int kind_locked(const void *iface)
{
    for (const struct entry *e = mv.bucket[slot(iface)]; e; e = e->next)
        if (e->iface == iface)
            return e->kind;
    return -1;
}

static int direction(unsigned src, unsigned dst)
{
    enum starpu_node_kind s = starpu_node_get_kind(src), d = starpu_node_get_kind(dst);
    if (s == STARPU_CPU_RAM && d == STARPU_DISK_RAM)
        return TO_DISK;
    if (s == STARPU_DISK_RAM && d == STARPU_CPU_RAM)
        return FROM_DISK;
    if (s == STARPU_CPU_RAM && d == STARPU_CUDA_RAM)
        return TO_GPU;
    if (s == STARPU_CUDA_RAM && d == STARPU_CPU_RAM)
        return FROM_GPU;
    return -1;
}

static int counted_any_to_any(void *src_iface, unsigned src_node, void *dst_iface,
                              unsigned dst_node, void *async)
{
    int dir = direction(src_node, dst_node);
    if (dir >= 0) {
        const struct starpu_vector_interface *v = src_iface;
        int64_t bytes = (int64_t)v->nx * (int64_t)v->elemsize;
        /* the RAM side names the tile */
        const void *ram = dir == TO_DISK || dir == TO_GPU ? src_iface : dst_iface;
        pthread_mutex_lock(&mv.lock);
        int kind = kind_locked(ram);
        if (kind >= 0)
            mv.bytes[dir][kind] += bytes;
        pthread_mutex_unlock(&mv.lock);
    }
    return vector_any_to_any(src_iface, src_node, dst_iface, dst_node, async);
}

/* The tile's entry out of the table: StarPU is about to free its interfaces. */
static void forget(starpu_data_handle_t h)
{
    const void *iface = starpu_data_get_interface_on_node(h, STARPU_MAIN_RAM);
    pthread_mutex_lock(&mv.lock);
    for (struct entry **at = &mv.bucket[slot(iface)]; *at; at = &(*at)->next) {
        if ((*at)->iface != iface)
            continue;
        struct entry *e = *at;
        *at = e->next;
        free(e);
        break;
    }
    pthread_mutex_unlock(&mv.lock);
}

static void make_ops(void)
{
    counted_ops = starpu_interface_vector_ops;
    counted_copy = *starpu_interface_vector_ops.copy_methods;
    vector_any_to_any = counted_copy.any_to_any;
    counted_copy.any_to_any = counted_any_to_any;
    counted_ops.copy_methods = &counted_copy;
    counted_ops.unregister_data_handle = forget;   /* (the vector interface has none) */
}

void nnt_moves_register(starpu_data_handle_t *h, uint32_t nx, size_t elsize, int kind)
{
    pthread_once(&ops_once, make_ops);
    struct starpu_vector_interface v = {
        .id = STARPU_VECTOR_INTERFACE_ID, .ptr = 0, .dev_handle = 0, .offset = 0, .nx = nx,
        .elemsize = elsize, .slice_base = 0, .allocsize = (size_t)nx * elsize,
    };
    starpu_data_register(h, -1, &v, &counted_ops);
    nnt_moves_set_kind(*h, kind);
}

void nnt_moves_set_kind(starpu_data_handle_t h, int kind)
{
    const void *iface = starpu_data_get_interface_on_node(h, STARPU_MAIN_RAM);
    size_t s = slot(iface);
    pthread_mutex_lock(&mv.lock);
    struct entry *e = mv.bucket[s];
    while (e && e->iface != iface)
        e = e->next;
    if (!e && (e = malloc(sizeof *e)) != NULL) {   /* without: counted as the library's */
        e->iface = iface;
        e->next = mv.bucket[s];
        mv.bucket[s] = e;
    }
    if (e)
        e->kind = kind;
    pthread_mutex_unlock(&mv.lock);
}

void nnt_moves_clear(void)
{
    pthread_mutex_lock(&mv.lock);
    for (size_t b = 0; b < NBUCKETS; b++) {
        while (mv.bucket[b]) {
            struct entry *e = mv.bucket[b];
            mv.bucket[b] = e->next;
            free(e);
        }
    }
    memset(mv.bytes, 0, sizeof mv.bytes);
    pthread_mutex_unlock(&mv.lock);
}

void nnt_moves_read(nnt_mem_stats *s, int reset)
{
    pthread_mutex_lock(&mv.lock);
    memcpy(s->to_disk_by, mv.bytes[TO_DISK], sizeof s->to_disk_by);
    memcpy(s->from_disk_by, mv.bytes[FROM_DISK], sizeof s->from_disk_by);
    memcpy(s->to_gpu_by, mv.bytes[TO_GPU], sizeof s->to_gpu_by);
    memcpy(s->from_gpu_by, mv.bytes[FROM_GPU], sizeof s->from_gpu_by);
    if (reset)
        memset(mv.bytes, 0, sizeof mv.bytes);
    pthread_mutex_unlock(&mv.lock);
}
