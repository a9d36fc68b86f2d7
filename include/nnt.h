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

/* ---- tensor operations ----------------------------------------------------------------
 * Each call checks its arguments, submits one task per tile (or per tuple of tiles) and
 * returns without waiting; later calls and host copies see the results (sequential
 * consistency per tile). Inputs must have been written (NNT_E_STATE otherwise). Unless a
 * function says otherwise, its tensors are NNT_FP32 and tensors that play the same role
 * have equal shapes and tilings (NNT_E_SHAPE otherwise, with a message naming the
 * mismatch). Results are deterministic: the same inputs and tilings give bit-identical
 * outputs, run after run. "Accumulates" means the output is added to, so gradients can be
 * summed over tiles, uses and micro-batches; it must have been written (e.g. zero-filled).
 * Shapes are written as in the comments of this header: (B, T, C) etc.                  */

/* dst = src for any two tilings of the same shape and dtype (retiling). */
NNT_API int nnt_tensor_copy(nnt_tensor *src, nnt_tensor *dst);
/* dst = src with dimensions permuted: dst dimension d is src dimension perm[d], so
 * dst.shape[d] == src.shape[perm[d]]; any tilings, any dtype (equal for both).
 * Example: (B, T, NH, hd) -> (B, NH, T, hd) is perm {0, 2, 1, 3}. */
NNT_API int nnt_tensor_permute(nnt_tensor *src, const int *perm, nnt_tensor *dst);

/* x = alpha * x */
NNT_API int nnt_tensor_scale(nnt_tensor *x, double alpha);
/* y = alpha * x + beta * y; with beta == 0, y is only written (need not be initialised). */
NNT_API int nnt_tensor_axpby(double alpha, nnt_tensor *x, double beta, nnt_tensor *y);
/* y = gelu(x), the tanh approximation used by GPT-2. x and y may be the same tensor. */
NNT_API int nnt_tensor_gelu(nnt_tensor *x, nnt_tensor *y);
/* dx = dy * gelu'(x). dx may be dy. */
NNT_API int nnt_tensor_gelu_backward(nnt_tensor *x, nnt_tensor *dy, nnt_tensor *dx);
/* y[m..., n...] += x[n...]: x's shape and tiling equal the trailing x-ndim dims of y's. */
NNT_API int nnt_tensor_add_broadcast(nnt_tensor *x, nnt_tensor *y);
/* y[n...] = alpha * sum over m... of x[m..., n...] + beta * y[n...]: the reverse of
 * nnt_tensor_add_broadcast (bias gradients). y's shape and tiling equal x's trailing dims;
 * beta == 0: y is only written. */
NNT_API int nnt_tensor_sum_leading(double alpha, nnt_tensor *x, double beta, nnt_tensor *y);

typedef enum nnt_trans {
    NNT_NOTRANS = 0,
    NNT_TRANS = 1
} nnt_trans;

typedef enum nnt_epilogue {
    NNT_EPILOGUE_NONE = 0,
    NNT_EPILOGUE_BIAS = 1,       /* C += bias[n...]                                          */
    NNT_EPILOGUE_BIAS_GELU = 2,  /* C += bias[n...] (bias may be NULL), then aux = gelu(C);
                                    C keeps the pre-activation that backward needs          */
    NNT_EPILOGUE_DGELU = 3       /* C = C * gelu'(aux), aux holding the pre-activation       */
} nnt_epilogue;

/* Tiled matrix product over groups of dimensions:
 *   C[b..., m..., n...] = alpha * sum_k op(A)[b..., m..., k...] * op(B)[b..., k..., n...]
 *                         + beta * C[b..., m..., n...]
 * with ndim_batch leading batch dims b..., ndim_k contracted dims k..., and
 *   A stored as (b..., m..., k...), or (b..., k..., m...) when trans_a == NNT_TRANS;
 *   B stored as (b..., k..., n...), or (b..., n..., k...) when trans_b == NNT_TRANS.
 * The m... and n... dims are what remains of A and B (at least one each). Every dimension
 * must have the same size and tile in all tensors that share it. Example, a linear layer
 * y = x W^T with x (B, T, C) and W (OC, C): gemm(NOTRANS, TRANS, 1, x, W, 0, y, 1, 0)
 * gives y (B, T, OC). beta == 0: C is only written. One task per (C tile, k tile) pair;
 * the k tiles of one C tile are accumulated in a fixed order (deterministic). */
NNT_API int nnt_tensor_gemm(nnt_trans trans_a, nnt_trans trans_b, double alpha, nnt_tensor *a,
                            nnt_tensor *b, double beta, nnt_tensor *c, int ndim_k,
                            int ndim_batch);
/* nnt_tensor_gemm, then an epilogue applied to each C tile after its last k tile, while it
 * is hot. bias: (n...) with C's n tiling. aux: C's shape and tiling. Unused ones NULL. */
NNT_API int nnt_tensor_gemm_ex(nnt_trans trans_a, nnt_trans trans_b, double alpha,
                               nnt_tensor *a, nnt_tensor *b, double beta, nnt_tensor *c,
                               int ndim_k, int ndim_batch, nnt_epilogue epilogue,
                               nnt_tensor *bias, nnt_tensor *aux);

/* LayerNorm over the last dimension of x (..., C): y = (x - mean) * rstd * gamma + beta with
 * rstd = 1 / sqrt(var + eps) (biased variance). gamma, beta: (C). mean, rstd: x's leading
 * dims (...) and tiling, saved for backward. Correct when C is split over several tiles. */
NNT_API int nnt_tensor_layernorm(nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *beta, double eps,
                                 nnt_tensor *y, nnt_tensor *mean, nnt_tensor *rstd);
/* dx = d(loss)/dx (written); dgamma and dbeta accumulate. */
NNT_API int nnt_tensor_layernorm_backward(nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *mean,
                                          nnt_tensor *rstd, nnt_tensor *dy, nnt_tensor *dx,
                                          nnt_tensor *dgamma, nnt_tensor *dbeta);

/* out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :] with tokens (B, T) NNT_INT32, wte (V, C),
 * wpe (maxT, C) with maxT >= T or NULL (no position embedding), out (B, T, C). out's (B, T)
 * tiling equals tokens'; wte's and wpe's C tiling equal out's; wpe's row tile equals out's
 * T tile. Token ids outside [0, V) give zero rows. */
NNT_API int nnt_tensor_embedding(nnt_tensor *tokens, nnt_tensor *wte, nnt_tensor *wpe,
                                 nnt_tensor *out);
/* dwte[tokens[b, t], :] += dout[b, t, :] and dwpe[t, :] += sum_b dout[b, t, :]
 * (accumulate, in a fixed order; dwpe may be NULL). */
NNT_API int nnt_tensor_embedding_backward(nnt_tensor *tokens, nnt_tensor *dout,
                                          nnt_tensor *dwte, nnt_tensor *dwpe);

/* Causal self-attention per (batch, head), flash style (no T x T matrix is stored):
 * o = softmax(scale * q k^T, keys after the query masked) v. q, k, v, o: (B, NH, T, hd), same
 * shape and tiling; lse (B, NH, T) with their leading tiling: the log-sum-exp of each query
 * row, saved for backward. hd may be split over tiles (the op then retiles internally). */
NNT_API int nnt_tensor_attention(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v, double scale,
                                 nnt_tensor *o, nnt_tensor *lse);
/* dq, dk, dv (written) from dout, recomputing the probabilities from lse. */
NNT_API int nnt_tensor_attention_backward(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                                          nnt_tensor *o, nnt_tensor *lse, nnt_tensor *dout,
                                          double scale, nnt_tensor *dq, nnt_tensor *dk,
                                          nnt_tensor *dv);

/* Softmax cross-entropy over the last dimension of logits (N..., V), which may be split
 * over tiles: lse[r] = log sum_j exp(logits[r, j]); loss[r] = lse[r] - logits[r, targets[r]],
 * 0 where targets[r] == ignore_index. targets (N...) NNT_INT32; loss, lse (N...) NNT_FP32;
 * all three with logits' leading shape and tiling. */
NNT_API int nnt_tensor_cross_entropy(nnt_tensor *logits, nnt_tensor *targets,
                                     int32_t ignore_index, nnt_tensor *loss, nnt_tensor *lse);
/* dlogits = scale * (softmax(logits) - onehot(targets)), 0 on ignored rows (written). For
 * the mean loss over n valid rows, scale = 1 / n. dlogits may be logits. */
NNT_API int nnt_tensor_cross_entropy_backward(nnt_tensor *logits, nnt_tensor *targets,
                                              int32_t ignore_index, nnt_tensor *lse,
                                              double scale, nnt_tensor *dlogits);

/* Sum of squares of every element of n tensors (any shapes and tilings), e.g. for the
 * global gradient norm. Waits for the result; summed in a fixed order (deterministic). */
NNT_API int nnt_tensors_sumsq(int n, nnt_tensor *const *tensors, double *sumsq);

typedef struct nnt_adam_options {
    size_t size;         /* sizeof(nnt_adam_options), set by the init macro               */
    double lr;           /* learning rate                                                  */
    double beta1, beta2; /* moment decay rates                                             */
    double eps;          /* added to sqrt(v_hat)                                            */
    double weight_decay; /* decoupled (AdamW) or L2 (Adam) weight decay                    */
    int decoupled;       /* 1: AdamW (PyTorch semantics), 0: Adam with L2 in the gradient  */
    double grad_scale;   /* gradients are multiplied by this first (clipping); 1: none     */
} nnt_adam_options;

#define NNT_ADAM_OPTIONS_INIT \
    { sizeof(nnt_adam_options), 1e-3, 0.9, 0.999, 1e-8, 0.0, 1, 1.0 }

/* Step number step (>= 1, for the bias corrections) of Adam/AdamW on parameter p with
 * gradient g and moments m, v (zero-filled before step 1); all of one shape and tiling. */
NNT_API int nnt_tensor_adam_step(const nnt_adam_options *opts, int64_t step, nnt_tensor *p,
                                 nnt_tensor *g, nnt_tensor *m, nnt_tensor *v);
/* SGD with momentum (PyTorch semantics: dampening 0, no Nesterov): g' = grad_scale * g +
 * weight_decay * p; buf = momentum * buf + g' (buf = g' at step 1, when buf need not be
 * initialised); p -= lr * buf. momentum == 0: buf may be NULL. */
NNT_API int nnt_tensor_sgd_step(double lr, double momentum, double weight_decay,
                                double grad_scale, int64_t step, nnt_tensor *p, nnt_tensor *g,
                                nnt_tensor *buf);

#ifdef __cplusplus
}
#endif

#endif /* NNT_H */
