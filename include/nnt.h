/* nnt — train transformer language models on tiled tensors with StarPU.
 *
 * Public API. C99, usable from C++. No StarPU or CUDA types appear here.
 *
 * Conventions
 *   - Every function returns int: NNT_OK (0) or a negative NNT_E_* code; nnt_strerror()
 *     names the code and nnt_ctx_last_error() gives the message of the last failure.
 *   - Objects are opaque handles created by nnt_X_create() and released by nnt_X_destroy();
 *     destroy accepts NULL. The library never aborts or exits the process.
 *   - Option structs start with `size_t size`; initialise them with their _INIT macro or
 *     _init() function so that later versions can add fields without breaking the ABI.
 *   - Tensors are row-major; shapes are int64_t arrays of at most NNT_MAX_DIMS entries.
 */
#ifndef NNT_H
#define NNT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) && __GNUC__ >= 4
#define NNT_API __attribute__((visibility("default")))
#else
#define NNT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ------------------------------------------------------------------------- */

#define NNT_VERSION_MAJOR 0
#define NNT_VERSION_MINOR 1
#define NNT_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define NNT_VERSION_NUMBER \
    (NNT_VERSION_MAJOR * 10000 + NNT_VERSION_MINOR * 100 + NNT_VERSION_PATCH)

/* Version of the library actually linked, as NNT_VERSION_NUMBER; string may be NULL. */
NNT_API int nnt_version(int *number, const char **string);

/* ---- status codes (numbered once, never reused) -------------------------------------- */

enum {
    NNT_OK = 0,
    NNT_E_INVAL = -1,        /* invalid argument (NULL handle, bad value, bad size)        */
    NNT_E_NOMEM = -2,        /* out of memory (host, device, or memory budget)             */
    NNT_E_IO = -3,           /* input/output error (open, read, write, rename)             */
    NNT_E_FORMAT = -4,       /* malformed or truncated file                                */
    NNT_E_SHAPE = -5,        /* shapes, tilings or dtypes of arguments do not match        */
    NNT_E_UNSUPPORTED = -6,  /* valid request this build or machine cannot do              */
    NNT_E_RUNTIME = -7,      /* StarPU, CUDA or another runtime failed                     */
    NNT_E_BUSY = -8,         /* resource already in use (e.g. a second live context)       */
    NNT_E_STATE = -9         /* object in the wrong state (e.g. its context was destroyed) */
};

/* Static English name of a status code ("invalid argument", ...); never NULL. */
NNT_API const char *nnt_strerror(int status);

/* ---- logging ------------------------------------------------------------------------- */

enum {
    NNT_LOG_ERROR = 0,
    NNT_LOG_WARN = 1,
    NNT_LOG_INFO = 2,
    NNT_LOG_DEBUG = 3
};

/* Receives every message at or below the current level. msg has no trailing newline.
 * May be called from any thread, so it must be thread-safe. */
typedef void (*nnt_log_fn)(int level, const char *msg, void *user);

/* Install a log callback; fn == NULL restores the default (stderr, "nnt: " prefix). */
NNT_API int nnt_log_set(nnt_log_fn fn, void *user);
/* Set the level (NNT_LOG_ERROR..NNT_LOG_DEBUG). The initial level is read from the
 * environment variable NNT_LOG_LEVEL ("error", "warn", "info", "debug" or 0..3);
 * default NNT_LOG_WARN. */
NNT_API int nnt_log_set_level(int level);
NNT_API int nnt_log_get_level(int *level);

/* ---- context ------------------------------------------------------------------------- */

typedef struct nnt_ctx nnt_ctx;

typedef struct nnt_ctx_options {
    size_t size;                 /* sizeof(nnt_ctx_options), set by the init macro          */
    int ncpus;                   /* CPU workers; -1 = one per available core                */
    int ncuda;                   /* CUDA devices; 0 = CPU only, -1 = all available          */
    const char *sched;           /* StarPU scheduler ("lws", "dmdas", ...); NULL = default  */
    int64_t mem_gpu_mib;         /* per-GPU memory budget in MiB; 0 = StarPU default        */
    int64_t mem_cpu_mib;         /* RAM budget in MiB; 0 = no explicit limit                */
    const char *swap_dir;        /* directory for disk swap; NULL = no disk swap            */
    int64_t swap_mib;            /* disk swap size in MiB; required with swap_dir           */
    const char *perfmodel_dir;   /* StarPU performance models; NULL = $STARPU_HOME if set,
                                    else $XDG_CACHE_HOME/nnt, else ~/.cache/nnt             */
} nnt_ctx_options;

#define NNT_CTX_OPTIONS_INIT \
    { sizeof(nnt_ctx_options), -1, -1, NULL, 0, 0, NULL, 0, NULL }

NNT_API int nnt_ctx_options_init(nnt_ctx_options *opts);

/* Start the runtime. opts may be NULL (defaults). One context may be live per process at a
 * time: a second create returns NNT_E_BUSY until the first is destroyed. */
NNT_API int nnt_ctx_create(const nnt_ctx_options *opts, nnt_ctx **ctx);
/* Wait for all work, release every tensor still alive (they become unusable: later calls
 * on them return NNT_E_STATE, and they must still be destroyed), shut the runtime down. */
NNT_API int nnt_ctx_destroy(nnt_ctx *ctx);
/* Wait until every submitted task has completed. */
NNT_API int nnt_ctx_wait(nnt_ctx *ctx);
/* Worker counts actually started; either pointer may be NULL. */
NNT_API int nnt_ctx_workers(const nnt_ctx *ctx, int *ncpus, int *ncuda);
/* Name of the scheduler in use (static string owned by the library). */
NNT_API int nnt_ctx_sched(const nnt_ctx *ctx, const char **name);
/* Message of the last failure in this context (ctx == NULL: of the last failure anywhere
 * in the calling thread, e.g. a failed nnt_ctx_create). Never NULL; "" when none. The
 * string is valid until the next nnt call in this thread. */
NNT_API const char *nnt_ctx_last_error(const nnt_ctx *ctx);

/* ---- tensors ------------------------------------------------------------------------- */

typedef struct nnt_tensor nnt_tensor;

#define NNT_MAX_DIMS 8

typedef enum nnt_dtype {
    NNT_FP32 = 1,    /* float                                                             */
    NNT_INT32 = 2,   /* int32_t (token ids, targets)                                      */
    NNT_BF16 = 3,    /* reserved: not yet supported (NNT_E_UNSUPPORTED)                   */
    NNT_FP16 = 4     /* reserved: not yet supported (NNT_E_UNSUPPORTED)                   */
} nnt_dtype;

/* A tensor of ndim (1..NNT_MAX_DIMS) dimensions cut into tiles of tile[] elements per
 * dimension (tile == NULL: a single tile). A tile entry larger than the dimension is
 * clamped to it; zero or negative entries are rejected. Edge tiles may be partial.
 * Storage is allocated lazily, on first write, wherever the runtime chooses. The content
 * is undefined until written or filled. */
NNT_API int nnt_tensor_create(nnt_ctx *ctx, nnt_dtype dtype, int ndim, const int64_t *shape,
                              const int64_t *tile, nnt_tensor **tensor);
/* Wait for pending work on the tensor and release it. NULL is accepted. */
NNT_API int nnt_tensor_destroy(nnt_tensor *tensor);

NNT_API int nnt_tensor_dtype(const nnt_tensor *tensor, nnt_dtype *dtype);
NNT_API int nnt_tensor_ndim(const nnt_tensor *tensor, int *ndim);
/* Write ndim entries each; the *_numel and *_ntiles give products. */
NNT_API int nnt_tensor_shape(const nnt_tensor *tensor, int64_t *shape);
NNT_API int nnt_tensor_tile_shape(const nnt_tensor *tensor, int64_t *tile);
NNT_API int nnt_tensor_grid(const nnt_tensor *tensor, int64_t *grid);
NNT_API int nnt_tensor_numel(const nnt_tensor *tensor, int64_t *numel);
NNT_API int nnt_tensor_ntiles(const nnt_tensor *tensor, int64_t *ntiles);

/* Copy a whole tensor from / to a contiguous row-major host buffer of exactly
 * numel * element-size bytes. Both return when the copy is complete. */
NNT_API int nnt_tensor_copy_from_host(nnt_tensor *tensor, const void *src, size_t bytes);
NNT_API int nnt_tensor_copy_to_host(nnt_tensor *tensor, void *dst, size_t bytes);

/* Fill with a constant (converted to the dtype; NNT_INT32 requires an integral value). */
NNT_API int nnt_tensor_fill(nnt_tensor *tensor, double value);
/* Deterministic pseudo-random fills (NNT_FP32 only): element values depend on the seed
 * and the element's position only, so any tiling gives the same tensor. Asynchronous. */
NNT_API int nnt_tensor_fill_uniform(nnt_tensor *tensor, uint64_t seed, double low,
                                    double high);
NNT_API int nnt_tensor_fill_normal(nnt_tensor *tensor, uint64_t seed, double mean,
                                   double stddev);

#ifdef __cplusplus
}
#endif

#endif /* NNT_H */
