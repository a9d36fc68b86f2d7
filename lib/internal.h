/* Internal declarations shared by the library's translation units. Not installed. */
#ifndef NNT_INTERNAL_H
#define NNT_INTERNAL_H

#include "config.h"

#include "nnt.h"

#include <pthread.h>
#include <starpu.h>
#include <stdarg.h>

/* CUDA codelets need both our CUDA kernels and a CUDA-enabled StarPU. */
#if defined(NNT_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define NNT_CUDA_CODELETS 1
#include "nnt_cuda.h"
#endif

#if defined(__GNUC__)
#define NNT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define NNT_PRINTF(f, a)
#endif

#define NNT_CTX_MAGIC 0x6e6e7463u     /* "nntc" */
#define NNT_TENSOR_MAGIC 0x6e6e7474u  /* "nntt" */
#define NNT_ERRMSG_MAX 512

/* One tile of a tensor: a StarPU handle plus the rank that owns it (multi-node later). */
typedef struct nnt_tile {
    starpu_data_handle_t handle;
    int owner;
} nnt_tile;

struct nnt_tensor {
    unsigned magic;
    nnt_ctx *ctx;                 /* NULL once the context was destroyed                  */
    nnt_tensor *prev, *next;      /* the context's list of live tensors                   */
    nnt_dtype dtype;
    size_t elsize;
    int ndim;
    int64_t shape[NNT_MAX_DIMS];  /* logical shape                                       */
    int64_t tile[NNT_MAX_DIMS];   /* base tile shape (clamped to shape)                  */
    int64_t grid[NNT_MAX_DIMS];   /* tiles per dimension = ceil(shape / tile)            */
    int64_t ntiles;
    nnt_tile *tiles;              /* (grid) row-major                                    */
    int written;                  /* every tile has been written once: readable. StarPU
                                     aborts on reading a never-written handle, so every
                                     read checks this first (nnt_tensor_check_readable)   */
};

struct nnt_ctx {
    unsigned magic;
    int ncpus, ncuda;
    const char *sched;
    char errmsg[NNT_ERRMSG_MAX];
    pthread_mutex_t lock;         /* guards the tensor list and errmsg                   */
    nnt_tensor *tensors;          /* live tensors, to orphan them on destroy             */
    int disk_node;                /* StarPU disk memory node, -1 without swap            */
};

/* ---- errors and logging (lib/error.c, lib/log.c) ---------------------------------- */

/* Record msg as the last error of ctx (may be NULL) and of the calling thread, log it at
 * debug level, and return status (a negative NNT_E_* code). */
int nnt_fail(const nnt_ctx *ctx, int status, const char *fmt, ...) NNT_PRINTF(3, 4);
void nnt_log(int level, const char *fmt, ...) NNT_PRINTF(2, 3);
void nnt_vlog(int level, const char *fmt, va_list ap);

/* A task body failed (it cannot return a status): log it and remember it, so that the next
 * nnt_ctx_wait() returns NNT_E_RUNTIME. */
void nnt_task_error(const char *codelet, const char *fmt, ...) NNT_PRINTF(2, 3);

/* ---- context (lib/ctx.c) ------------------------------------------------------------ */

/* 0 if ctx is the live context, else a failure (recorded) naming the function. */
int nnt_ctx_check(const nnt_ctx *ctx, const char *func);
void nnt_ctx_add_tensor(nnt_ctx *ctx, nnt_tensor *t);
void nnt_ctx_remove_tensor(nnt_ctx *ctx, nnt_tensor *t);

/* ---- tensors (lib/tensor.c) --------------------------------------------------------- */

/* 0 if t is a usable tensor (its context alive), else a recorded failure. */
int nnt_tensor_check(const nnt_tensor *t, const char *func);
/* nnt_tensor_check, plus: the tensor has been written (filled, copied into, computed). */
int nnt_tensor_check_readable(const nnt_tensor *t, const char *func);
/* Element size of a dtype, 0 for unknown or unsupported. */
size_t nnt_dtype_size(nnt_dtype dtype);
/* Tile at grid multi-index coord; its shape and origin (element offset per dimension). */
void nnt_tensor_tile_coord(const nnt_tensor *t, int64_t linear, int64_t *coord);
void nnt_tensor_tile_box(const nnt_tensor *t, const int64_t *coord, int64_t *origin,
                         int64_t *shape);

/* ---- codelets (lib/codelets/) -------------------------------------------------------- */

/* Submit cl with one handle (W) and an argument block copied into the task; maps StarPU's
 * errors to NNT_E_*. */
int nnt_submit_1(nnt_tensor *t, struct starpu_codelet *cl, starpu_data_handle_t h,
                 const void *args, size_t args_size);

int nnt_insert_fill(nnt_tensor *t, starpu_data_handle_t h, double value);
int nnt_insert_fill_random(nnt_tensor *t, starpu_data_handle_t h, const int64_t *origin,
                           const int64_t *tile_shape, uint64_t seed, int dist, float a,
                           float b);

#endif /* NNT_INTERNAL_H */
