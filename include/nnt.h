/* SPDX-License-Identifier: MIT */
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
/* ---- version and status codes (numbered once, never reused) ----------------------------- */
#define NNT_VERSION_MAJOR 0
#define NNT_VERSION_MINOR 4
#define NNT_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH */
#define NNT_VERSION_NUMBER \
    (NNT_VERSION_MAJOR * 10000 + NNT_VERSION_MINOR * 100 + NNT_VERSION_PATCH)

/* Version of the library actually linked, as NNT_VERSION_NUMBER; string may be NULL. */
NNT_API int nnt_version(int *number, const char **string);

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


/* ---- handles ----------------------------------------------------------------------------
 * Every object is an opaque handle: created by its nnt_X_create / _open / _load function,
 * released by nnt_X_destroy (which accepts NULL). */
typedef struct nnt_ctx nnt_ctx;             /* the runtime (nnt_ctx_create)                */
typedef struct nnt_tensor nnt_tensor;       /* a tensor cut into tiles (nnt_tensor_create) */
typedef struct nnt_layer nnt_layer;         /* a layer, or a whole model (nnt_model_create) */
typedef struct nnt_optim nnt_optim;         /* an optimizer (nnt_optim_create)             */
typedef struct nnt_tokenizer nnt_tokenizer; /* text to token ids and back                  */
typedef struct nnt_data nnt_data;           /* a stream of tokens from files (nnt_data_open) */
typedef struct nnt_trainer nnt_trainer;     /* the training loop (nnt_trainer_create)      */


/* ---- context ----------------------------------------------------------------------------
 * StarPU's workers and memory nodes, the matrix-product precision, the CPU kernels
 * chosen at start, memory statistics, this process's rank among several. */
typedef struct nnt_ctx_options {
    size_t size;                 /* sizeof(nnt_ctx_options), set by the init macro          */
    int ncpus;                   /* CPU workers; -1 = one per available core                */
    int ncuda;                   /* CUDA devices; 0 = CPU only, -1 = all available          */
    const char *sched;           /* StarPU scheduler ("lws", "dmdas", ...); NULL = StarPU's
                                    default, dmdas when GPUs are used                      */
    int64_t mem_gpu_mib;         /* per-GPU memory budget in MiB; 0 = the card less a reserve */
    int64_t mem_cpu_mib;         /* RAM budget in MiB; 0 = RAM available at start-up        */
    const char *swap_dir;        /* directory for disk swap (created when missing); NULL: none */
    int64_t swap_mib;            /* disk swap size in MiB; required with swap_dir           */
    const char *perfmodel_dir;   /* StarPU performance models; NULL = $STARPU_HOME if set,
                                    else $XDG_CACHE_HOME/nnt, else ~/.cache/nnt             */
    int mpi;                     /* 1: one rank of an MPI job (StarPU-MPI; see nnt_ctx_rank);
                                    -1: 1 when an MPI launcher started several ranks        */
    int distribution;            /* under MPI, which rank owns each tile: an
                                    nnt_distribution (NNT_DIST_ROOT, _SHARDED, _DATA)       */
    int release_weights;         /* under MPI with NNT_DIST_SHARDED or _DATA: 1 = a rank drops
                                    the parameter tiles it received as soon as a layer's
                                    forward or backward has used them, and gathers them
                                    again for the next use (ZeRO-3 / FSDP full sharding:
                                    per-rank RAM about the rank's share of the state plus
                                    a window of two layers, for a second gather of the
                                    weights each step); 0 = keep them until their owner
                                    updates them (the default)                             */
} nnt_ctx_options;

#define NNT_CTX_OPTIONS_INIT \
    { sizeof(nnt_ctx_options), -1, -1, NULL, 0, 0, NULL, 0, NULL, 0, 0, 0 }

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

#define NNT_MAX_MEM_NODES 16

/* What a tile holds, for nnt_mem_stats's transfers by kind. */
enum nnt_mem_kind {
    NNT_MEM_WEIGHTS = 0,       /* a model's parameters (fp32, or their bf16 copies)        */
    NNT_MEM_GRADIENTS = 1,     /* their gradients                                          */
    NNT_MEM_OPTIM_STATE = 2,   /* an optimizer's state (Adam's moments)                    */
    NNT_MEM_TENSORS = 3,       /* every other tensor: activations, the caller's own        */
    NNT_MEM_INTERNAL = 4       /* the library's own tiles (packed operands, partial sums)  */
};
#define NNT_MEM_KINDS 8        /* room for kinds to come                                   */

typedef struct nnt_mem_stats {
    size_t size;                 /* sizeof(nnt_mem_stats): set it before the call            */
    int nnodes;                  /* memory nodes described below                             */
    struct {
        char name[32];           /* "RAM", "CUDA0", "disk"                                   */
        int64_t used_bytes;      /* allocated now                                            */
        int64_t peak_bytes;      /* most allocated since nnt_ctx_create or the last reset    */
        int64_t budget_bytes;    /* limit, 0 = none                                          */
    } node[NNT_MAX_MEM_NODES];
    int64_t bytes_moved;         /* bytes transferred between nodes since the last reset     */
    double transfer_wait_s;      /* worker time spent waiting for data, seconds              */
    int64_t owned_bytes;         /* bytes of the live tensors' tiles this process owns (all
                                    of them without MPI; its share under MPI)               */
    int64_t bytes_to_disk;       /* of bytes_moved: written to the disk swap (evictions)    */
    int64_t bytes_from_disk;     /* of bytes_moved: read back from it                       */
    /* Which tensors move: bytes_to_disk, bytes_from_disk and the transfers from RAM to the
     * GPUs and back, by what the tiles hold (index NNT_MEM_*; kinds not defined yet stay 0). */
    int64_t to_disk_by[NNT_MEM_KINDS];
    int64_t from_disk_by[NNT_MEM_KINDS];
    int64_t to_gpu_by[NNT_MEM_KINDS];
    int64_t from_gpu_by[NNT_MEM_KINDS];
} nnt_mem_stats;

NNT_API int nnt_ctx_mem_stats(nnt_ctx *ctx, nnt_mem_stats *stats, int reset);

/* Precision of the operands of matrix products: nnt_tensor_gemm, nnt_tensor_gemm_ex and
 * the products inside layers (linear maps, the lm head). The attention's own products
 * (q k^T, p v, their gradients) follow NNT_PRECISION_BF16 on CPU workers with bf16
 * dot-product instructions and oneDNN only, and stay fp32 elsewhere (GPUs included; see
 * nnt_ctx_set_precision(3)). Storage, accumulation, epilogues and every other op stay fp32.
 *   NNT_PRECISION_FP32  full float operands (the default)
 *   NNT_PRECISION_TF32  operands rounded to TF32 (10 mantissa bits): tensor cores on GPUs
 *   NNT_PRECISION_BF16  operands rounded to bfloat16 (7 mantissa bits): bf16 tensor cores
 * Operands are rounded to nearest (ties to even) on the CPU as on the GPU, so every
 * product of two operands is exact in float and CPU and GPU tasks compute the same up to
 * the order of the float sums. On the CPU, bf16 products run on bf16 dot-product
 * instructions where the CPU has them (AVX512-BF16, AMX), nnt's CPU backend is oneDNN and
 * a measurement at start finds them not slower than fp32 products (nnt_ctx_kernels,
 * NNT_GEMM_BF16): faster than fp32 there (GPT-2 124M step 1.6x on AMD Zen 4); elsewhere
 * (an Intel Xeon with AVX512-BF16 and no AMX: half its fp32 rate), and for TF32, the
 * rounding is an extra pass over the operand tiles into per-worker scratch memory (outside
 * the RAM budget): no faster than fp32. */
typedef enum nnt_precision {
    NNT_PRECISION_FP32 = 0,
    NNT_PRECISION_TF32 = 1,
    NNT_PRECISION_BF16 = 2
} nnt_precision;

/* Set the precision of the products submitted from now on (those already submitted keep
 * theirs); a context starts with NNT_PRECISION_FP32. */
NNT_API int nnt_ctx_set_precision(nnt_ctx *ctx, nnt_precision precision);
NNT_API int nnt_ctx_precision(const nnt_ctx *ctx, nnt_precision *precision);

/* This process's rank in the context's MPI job and the number of ranks (0 and 1 without
 * MPI); either pointer may be NULL. Under MPI, nnt_ctx_create is collective: every rank
 * must call it with the same mpi and distribution options (checked: NNT_E_INVAL on every
 * rank otherwise). Host copies are collective too: nnt_tensor_copy_to_host returns the
 * whole tensor on every rank; nnt_tensor_copy_from_host takes each tile from its owner's
 * buffer (every rank passes the same values). Saves (checkpoints, weights, model
 * directories) are called on every rank, whose reads they need, and rank 0 alone writes
 * the files. A library built without StarPU-MPI
 * (configure --with-mpi=no) returns NNT_E_UNSUPPORTED from nnt_ctx_create with mpi = 1. */
NNT_API int nnt_ctx_rank(const nnt_ctx *ctx, int *rank, int *size);

/* The CPU kernels this context chose at creation, in words (static storage of the context,
 * valid until nnt_ctx_destroy): the GEMM backend (oneDNN or BLIS) and why -- the
 * environment's NNT_GEMM=blis|onednn|measure (measure: both timed on one core at start), a
 * build without oneDNN, or by default a feature test (oneDNN where its instruction set has
 * AVX2 or AVX-512) -- then BLIS's kernel set and why (its own choice, BLIS_ARCH_TYPE, or
 * skx forced on a CPU with the AVX-512 subsets it needs). Also logged at info level. A bad
 * NNT_GEMM makes nnt_ctx_create fail with NNT_E_INVAL. */
NNT_API int nnt_ctx_kernels(const nnt_ctx *ctx, const char **desc);


/* ---- tensors ---------------------------------------------------------------------------- */
#define NNT_MAX_DIMS 8

typedef enum nnt_dtype {
    NNT_FP32 = 1,    /* float                                                             */
    NNT_INT32 = 2,   /* int32_t (token ids, targets)                                      */
    NNT_BF16 = 3,    /* bfloat16, stored as uint16_t bit patterns (new in 0.2): storage,
                        copies, fills, nnt_tensor_convert and GEMM operands                */
    NNT_FP16 = 4,    /* reserved: not yet supported (NNT_E_UNSUPPORTED)                   */
    NNT_NF4 = 5      /* 4-bit NormalFloat (QLoRA; bitsandbytes' "nf4", blocks of 64), new
                        in 0.4: each block of 64 consecutive values (of the row-major
                        tensor) keeps its absolute maximum (a float) and each value a 4-bit
                        index into NF4's 16 values. Tiles hold whole blocks: the runs of
                        consecutive values a tile holds (the innermost dims it covers
                        whole, times its extent along the one it cuts), and that dim's
                        rows, are multiples of 64 (a matrix's inputs and their tile, when
                        its tiles cut them). Written by nnt_tensor_convert from NNT_FP32 or
                        NNT_BF16 (quantized as bitsandbytes' quantize_4bit, bit for bit)
                        or by nnt_tensor_copy_from_host; read by nnt_tensor_convert
                        (dequantized: table value times absmax in float) and as B of
                        nnt_tensor_gemm (a frozen weight, nnt_layer_freeze's
                        NNT_FREEZE_NF4). Host copies hold bitsandbytes' form of the whole
                        tensor: numel / 2 bytes of codes (row-major, two a byte, the
                        first in the high half), then numel / 64 float absmax. Fills,
                        copies and other operations refuse it.                            */
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
/* Inverted dropout (NNT_FP32): y = x / (1 - p) where the element is kept, 0 where dropped;
 * an element is dropped when the uniform value nnt_tensor_fill_uniform(seed, 0, 1) gives it
 * is below p, so the mask depends on the seed and the element's position only (any tiling,
 * CPU or GPU: the same mask). Its backward is the same call on dy with the same seed. y may
 * be x; p in [0, 1). New in 0.3. */
NNT_API int nnt_tensor_dropout(nnt_tensor *x, uint64_t seed, double p, nnt_tensor *y);


/* ---- tensor operations ------------------------------------------------------------------
 * Each call checks its arguments, submits one task per tile (or per tuple of tiles) and
 * returns without waiting; later calls and host copies see the results (sequential
 * consistency per tile). Inputs must have been written (NNT_E_STATE otherwise). Unless a
 * function says otherwise, its tensors are NNT_FP32 and tensors that play the same role
 * have equal shapes and tilings (NNT_E_SHAPE otherwise, with a message naming the
 * mismatch). Results are deterministic: the same inputs and tilings give bit-identical
 * outputs, run after run. "Accumulates" means the output is added to, so gradients can be
 * summed over tiles, uses and micro-batches; it must have been written (e.g. zero-filled).
 * Shapes are written as in the comments of this header: (B, T, C) etc. */
/* dst = src for any two tilings of the same shape and dtype (retiling). */
NNT_API int nnt_tensor_copy(nnt_tensor *src, nnt_tensor *dst);
/* dst = src converted between NNT_FP32 and NNT_BF16 (either way; equal dtypes: a copy),
 * same shape and tiling. To bf16: rounded to nearest, ties to even (NaN stays NaN, values
 * beyond bf16's range become infinities); to float: exact. New in 0.2. */
NNT_API int nnt_tensor_convert(nnt_tensor *src, nnt_tensor *dst);
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
/* y = x Phi(x), the exact GELU (torch's gelu, transformers' "gelu"; Phi the standard normal
 * CDF); x and y may be the same. New in 0.3. */
NNT_API int nnt_tensor_gelu_erf(nnt_tensor *x, nnt_tensor *y);
/* dx = dy * (Phi(x) + x phi(x)), its backward. dx may be dy. New in 0.3. */
NNT_API int nnt_tensor_gelu_erf_backward(nnt_tensor *x, nnt_tensor *dy, nnt_tensor *dx);
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
    NNT_EPILOGUE_DGELU = 3,      /* C = C * gelu'(aux), aux holding the pre-activation       */
    NNT_EPILOGUE_BIAS_GELU_ERF = 4, /* BIAS_GELU with the exact GELU x Phi(x). New in 0.3.   */
    NNT_EPILOGUE_DGELU_ERF = 5   /* DGELU with the exact GELU's derivative. New in 0.3.      */
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
 * the k tiles of one C tile are accumulated in a fixed order (deterministic). A and B may
 * be NNT_BF16 (new in 0.2); the operands take the context's precision
 * (nnt_ctx_set_precision). */
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

/* out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :] with tokens (B, T) NNT_INT32, wte (V, C)
 * NNT_FP32 or NNT_BF16 (rows widened exactly; its gathers run on CPU workers), wpe (maxT, C)
 * NNT_FP32 with maxT >= T or NULL (no position embedding), out (B, T, C). out's (B, T)
 * tiling equals tokens'; wte's and wpe's C tiling equal out's; wpe's row tile equals out's
 * T tile. Token ids outside [0, V) give zero rows. Per-token positions (packed examples):
 * the rows of wpe at positions (B, T) NNT_INT32 are nnt_tensor_embedding(positions, wpe,
 * NULL, tmp), added to out (nnt_layer_set_positions does it so for GPT-2). */
NNT_API int nnt_tensor_embedding(nnt_tensor *tokens, nnt_tensor *wte, nnt_tensor *wpe,
                                 nnt_tensor *out);
/* dwte[tokens[b, t], :] += dout[b, t, :] and dwpe[t, :] += sum_b dout[b, t, :]
 * (accumulate, in a fixed order; dwpe may be NULL). */
NNT_API int nnt_tensor_embedding_backward(nnt_tensor *tokens, nnt_tensor *dout,
                                          nnt_tensor *dwte, nnt_tensor *dwpe);

/* Causal self-attention per (batch, head), flash style (no T x T matrix is stored):
 * o = softmax(scale * q k^T, keys after the query masked) v. q, o: (B, NH, T, hd), same
 * shape and tiling; k, v: (B, NKV, T, hd), same shape and tiling, NKV dividing NH, with q's
 * B and T tiling (head and hd tiling free): NKV == NH is multi-head attention, NKV < NH
 * grouped-query attention, q head h reading kv head h / (NH / NKV) (Hugging Face's
 * repeat_kv) in place, without copies. lse (B, NH, T) with q's leading tiling: the
 * log-sum-exp of each query row, saved for backward. hd may be split over tiles (the op then
 * retiles internally). */
NNT_API int nnt_tensor_attention(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v, double scale,
                                 nnt_tensor *o, nnt_tensor *lse);
/* dq (q's layout), dk, dv (k's layout) written from dout, recomputing the probabilities from
 * lse; a kv head's gradients sum those of its q heads, in a fixed order (deterministic). */
NNT_API int nnt_tensor_attention_backward(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                                          nnt_tensor *o, nnt_tensor *lse, nnt_tensor *dout,
                                          double scale, nnt_tensor *dq, nnt_tensor *dk,
                                          nnt_tensor *dv);

/* Options of the attention operations' _ex forms (new in 0.3; more may be appended). */
typedef struct nnt_tensor_attention_options {
    size_t size;      /* sizeof(nnt_tensor_attention_options), set by the init macro         */
    double scale;     /* scores are scale * q k^T; 0: 1 / sqrt(hd)                           */
    int64_t window;   /* sliding window W: query position i sees keys i - W < j <= i
                         (Hugging Face's sliding_window, Mistral's and Qwen2's); 0: none,
                         every earlier key (plain causal, as the forms without _ex)           */
    double softcap;   /* > 0: each score s = scale q.k is soft-capped to softcap tanh(s /
                         softcap) before the mask and softmax (Gemma 2's
                         attn_logit_softcapping); 0: none                                    */
    /* appended in 0.3 (a size without it gets the fields above only) */
    nnt_tensor *positions;  /* packed examples: (B, T) NNT_INT32, q's B and T tiling, each
                         token's position in its example (Hugging Face's position_ids that
                         restart at 0 at each example); the query at index i with position
                         p (clamped to 0 .. i) sees the keys i - p <= j <= i only (its
                         example; the window still applies); NULL: every earlier key. In
                         the _kv form the Tq queries' positions (B, Tq), the query at index
                         past + i with position p seeing keys past + i - p .. past + i:
                         sequences of different lengths side by side, each padded on the
                         left (its pads an example of their own)                            */
    /* appended in 0.3 (a size without them: no sinks) */
    nnt_tensor *sinks;  /* attention sinks (gpt-oss): (NH) fp32, tiled as q's heads, a logit
                         per head added to each of its rows' softmax denominators with no
                         value (o = sum_j p_j v_j, p = softmax over the row's scores and the
                         sink); lse then includes the sink. The forwards read it; the
                         backward takes the forward's o and lse (with the sink) and sinks
                         again; NULL: none                                                 */
    nnt_tensor *dsinks; /* backward only: the sinks' gradient is ADDED to it (sinks' layout);
                         NULL: not computed                                                  */
} nnt_tensor_attention_options;

#define NNT_TENSOR_ATTENTION_OPTIONS_INIT \
    { sizeof(nnt_tensor_attention_options), 0.0, 0, 0.0, NULL, NULL, NULL }

/* nnt_tensor_attention and _backward with options (NULL: the INIT values). A window gives
 * the same result as masking the keys outside it, and costs less: a query tile and a key
 * tile whose keys all lie before the tile's windows get no task. Window >= T is plain
 * causal attention, bit for bit. */
NNT_API int nnt_tensor_attention_ex(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                                    const nnt_tensor_attention_options *opts, nnt_tensor *o,
                                    nnt_tensor *lse);
NNT_API int nnt_tensor_attention_backward_ex(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                                             nnt_tensor *o, nnt_tensor *lse, nnt_tensor *dout,
                                             const nnt_tensor_attention_options *opts,
                                             nnt_tensor *dq, nnt_tensor *dk, nnt_tensor *dv);

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
/* As nnt_tensor_cross_entropy_backward, each row r's gradient multiplied by weights[r]
 * (new in 0.3): weights (N...) NNT_FP32 with lse's shape and tiling, NULL: every row 1. */
NNT_API int nnt_tensor_cross_entropy_backward_ex(nnt_tensor *logits, nnt_tensor *targets,
                                                 int32_t ignore_index, nnt_tensor *lse,
                                                 double scale, nnt_tensor *weights,
                                                 nnt_tensor *dlogits);
/* Label smoothing (new in 0.4): the cross-entropy against (1 - epsilon) onehot(targets) +
 * epsilon / V, epsilon in [0, 1) (torch's cross_entropy(label_smoothing=epsilon),
 * transformers' LabelSmoother): loss[r] = (1 - epsilon) (lse[r] - logits[r, targets[r]]) +
 * epsilon (lse[r] - the mean of logits[r, :]), 0 where targets[r] == ignore_index; lse as
 * nnt_tensor_cross_entropy's. epsilon 0: nnt_tensor_cross_entropy. */
NNT_API int nnt_tensor_cross_entropy_smoothed(nnt_tensor *logits, nnt_tensor *targets,
                                              int32_t ignore_index, double epsilon,
                                              nnt_tensor *loss, nnt_tensor *lse);
/* Its gradient: dlogits = scale weights[r] (softmax(logits) - (1 - epsilon) onehot(targets)
 * - epsilon / V), 0 on ignored rows (written); weights NULL: every row 1; dlogits may be
 * logits. epsilon 0: nnt_tensor_cross_entropy_backward_ex. */
NNT_API int nnt_tensor_cross_entropy_smoothed_backward(nnt_tensor *logits, nnt_tensor *targets,
                                                       int32_t ignore_index, nnt_tensor *lse,
                                                       double epsilon, double scale,
                                                       nnt_tensor *weights,
                                                       nnt_tensor *dlogits);

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

/* RMSNorm over the last dimension of x (..., C), as Hugging Face's LlamaRMSNorm:
 * y = x * rstd * gamma with rstd = 1 / sqrt(mean(x^2) + eps) (mean over C, in double).
 * gamma: (C), any tiling. rstd: x's leading dims (...) and tiling, saved for backward.
 * eps > 0. Correct when C is split over several tiles. */
NNT_API int nnt_tensor_rmsnorm(nnt_tensor *x, nnt_tensor *gamma, double eps, nnt_tensor *y,
                               nnt_tensor *rstd);
/* dx = d(loss)/dx (written); dgamma (C) accumulates. */
NNT_API int nnt_tensor_rmsnorm_backward(nnt_tensor *x, nnt_tensor *gamma, nnt_tensor *rstd,
                                        nnt_tensor *dy, nnt_tensor *dx, nnt_tensor *dgamma);

/* SwiGLU, the gated activation of the Llama MLP: y = silu(gate) * up with
 * silu(g) = g / (1 + exp(-g)). gate, up, y: one shape and tiling (any). y may be gate or up. */
NNT_API int nnt_tensor_swiglu(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *y);
/* dgate = dy * up * silu'(gate), dup = dy * silu(gate) (both written, not accumulated); all
 * five of one shape and tiling. dgate and dup must differ; each may be any of gate, up, dy
 * (in place). */
NNT_API int nnt_tensor_swiglu_backward(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *dy,
                                       nnt_tensor *dgate, nnt_tensor *dup);

/* Scaling of the RoPE frequencies (nnt_rope_options.scaling). */
typedef enum nnt_rope_scaling {
    NNT_ROPE_SCALING_NONE = 0,    /* inv_freq[i] = theta^(-2i/hd)                         */
    NNT_ROPE_SCALING_LLAMA3 = 1,  /* Llama 3.1's: Hugging Face rope_type "llama3"          */
    NNT_ROPE_SCALING_LINEAR = 2,  /* positions divided by factor: rope_type "linear"       */
    NNT_ROPE_SCALING_YARN = 3,    /* YaRN: rope_type "yarn" (factor, original_max_position,
                                     beta_fast, beta_slow, truncate, attention_factor)     */
    NNT_ROPE_SCALING_LONGROPE = 4 /* LongRoPE (Phi-3): rope_type "longrope" (short_factor,
                                     long_factor, original_max_position, factor,
                                     attention_factor)                                      */
} nnt_rope_scaling;

/* Frequencies a longrope factor list holds at most (rotary_dim / 2). */
#define NNT_ROPE_MAX_FACTORS 256

typedef struct nnt_rope_options {
    size_t size;            /* sizeof(nnt_rope_options), set by the init macro            */
    double theta;           /* base of the frequencies (rope_theta), > 0                   */
    int scaling;            /* NNT_ROPE_SCALING_NONE, _LLAMA3, _LINEAR, _YARN, _LONGROPE   */
    double factor;          /* llama3, linear, yarn, longrope (rope_scaling.factor), > 0   */
    double low_freq_factor, high_freq_factor;   /* llama3 only, 0 < low < high             */
    int64_t original_max_position;  /* llama3, yarn, longrope (original_max_position_embeddings)
                                       > 0                                                */
    /* yarn only (transformers' _compute_yarn_parameters): the frequencies from beta_fast
     * rotations over original_max_position kept (extrapolated), from beta_slow on divided
     * by factor (interpolated), a linear ramp between (its ends rounded out to whole
     * frequencies with truncate); attention_factor > 0 multiplies the cosines and sines in
     * transformers: nnt's attention layer multiplies its scores by attention_factor^2
     * instead (the rope op rotates only). 0: 0.1 ln(factor) + 1 (1 for factor <= 1). */
    double beta_fast, beta_slow;    /* > 0 (32, 1)                                        */
    double attention_factor;        /* >= 0                                              */
    int truncate;                   /* 1 (transformers' default) or 0                     */
    /* The rotated part of each head vector (transformers' partial_rotary_factor): its first
     * rotary_dim = (int64_t)(hd * partial_rotary_factor) entries, rotate-half pairs (i,
     * i + rotary_dim/2), frequencies over rotary_dim; the other entries pass unchanged.
     * 0 or 1: the whole vector; else in (0, 1) with rotary_dim even and >= 2. */
    double partial_rotary_factor;
    /* longrope only (transformers' _compute_longrope_parameters): nfactors = rotary_dim / 2
     * divisors of the frequencies, inv[i] = 1 / (f[i] theta^(2i / rotary_dim)), f
     * short_factor when a call's last position + 1 <= original_max_position, else
     * long_factor (transformers chooses per forward by its largest position; cached keys
     * keep what they were rotated with). attention_factor 0: sqrt(1 + ln(factor) /
     * ln(original_max_position)), 1 for factor <= 1 (factor: max_position_embeddings /
     * original_max_position when a config gives none). */
    int64_t nfactors;
    float short_factor[NNT_ROPE_MAX_FACTORS];
    float long_factor[NNT_ROPE_MAX_FACTORS];
    /* 0. The structure is held by value in nnt_model_config, so its size never changes:
     * a later version's fields take this room, and a library older than them refuses a
     * structure whose reserved words are not 0 (NNT_E_UNSUPPORTED). New in 0.3. */
    uint64_t reserved[16];
} nnt_rope_options;

/* theta 10000, no scaling; the llama3 fields hold Llama 3.1's values (factor 8, low 1,
 * high 4, original 8192), used only with NNT_ROPE_SCALING_LLAMA3; yarn's transformers'
 * defaults (beta_fast 32, beta_slow 1, attention_factor from factor, truncate). */
#define NNT_ROPE_OPTIONS_INIT \
    { sizeof(nnt_rope_options), 10000.0, NNT_ROPE_SCALING_NONE, 8.0, 1.0, 4.0, 8192, 32.0, \
      1.0, 0.0, 1, 1.0, 0, { 0 }, { 0 }, { 0 } }

/* Rotary position embedding, Hugging Face's rotate-half convention, on x (B, NH, T, hd) of
 * the attention layout: for every head vector at sequence index t (position
 * pos = t + pos_offset) and i < r/2 (r the rotary_dim of opts: hd unless
 * partial_rotary_factor is set), with a = pos * inv_freq[i] and m yarn's and longrope's
 * attention factor (1 for the other scalings),
 *   y[i]       = x[i] m cos(a) - x[i + r/2] m sin(a)
 *   y[i + r/2] = x[i + r/2] m cos(a) + x[i] m sin(a),
 * and y[j] = x[j] for j >= r. inv_freq as Hugging Face computes it in float (opts; NULL:
 * NNT_ROPE_OPTIONS_INIT); angle, cosine and sine in double. y: x's shape and tiling; y may
 * be x (in place). hd even; its tile hd (whole vectors) or a divisor of r/2; any B, NH, T
 * tiling. pos_offset >= 0 (a KV cache's length). */
NNT_API int nnt_tensor_rope(nnt_tensor *x, const nnt_rope_options *opts, int64_t pos_offset,
                            nnt_tensor *y);
/* dx = the transposed rotation of dy, times m (the gradient of nnt_tensor_rope); dx may be
 * dy. */
NNT_API int nnt_tensor_rope_backward(nnt_tensor *dy, const nnt_rope_options *opts,
                                     int64_t pos_offset, nnt_tensor *dx);
/* nnt_tensor_rope with a position per token: the head vectors of token (b, t) rotated to
 * position positions[b, t], positions (B, T) NNT_INT32 with x's B and T tiling (packed
 * examples: Hugging Face's position_ids restarting at 0). longrope: the short factors,
 * T <= original_max_position (past it transformers chooses by the largest position, which
 * the host does not read: NNT_E_UNSUPPORTED). */
NNT_API int nnt_tensor_rope_positions(nnt_tensor *x, const nnt_rope_options *opts,
                                      nnt_tensor *positions, nnt_tensor *y);
/* dx = the transposed rotation of dy at the same positions, times m; dx may be dy. */
NNT_API int nnt_tensor_rope_positions_backward(nnt_tensor *dy, const nnt_rope_options *opts,
                                               nnt_tensor *positions, nnt_tensor *dx);

/* Causal attention of Tq queries that follow cached keys: query i of q (B, NH, Tq, hd) sits
 * at position past + i and attends keys 0 .. past + i of k, v (B, NKV, Tk, hd), past + Tq
 * <= Tk (keys after the last query are ignored: a cache of Tk preallocated rows is passed
 * whole). o (B, NH, Tq, hd), q's layout. Grouped-query attention as nnt_tensor_attention
 * (kv head h / (NH / NKV), in place). k, v: q's batch size and tiling; any head, sequence
 * and hd tiling. Forward only (no lse). past = 0, Tk = Tq gives nnt_tensor_attention's o. */
NNT_API int nnt_tensor_attention_kv(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v, int64_t past,
                                    double scale, nnt_tensor *o);
/* nnt_tensor_attention_kv with options (NULL: the INIT values): with a window W, query i
 * (position past + i) attends keys past + i - W < j <= past + i; key tiles older than every
 * query's window are not read. */
NNT_API int nnt_tensor_attention_kv_ex(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v,
                                       int64_t past, const nnt_tensor_attention_options *opts,
                                       nnt_tensor *o);


/* ---- layers -----------------------------------------------------------------------------
 * A layer maps one input tensor to one output tensor and back-propagates through it. It
 * owns its parameters, their gradients, what its forward keeps for backward, and its output
 * and input-gradient tensors: forward returns a tensor owned by the layer, valid until the
 * layer's next forward or backward or its destruction (never destroy it). Shapes: rows are
 * any leading dimensions (B, T); the activations take the tiling of those dimensions from
 * the input and are (re)allocated when the input's shape or tiling changes.
 * Gradients ACCUMULATE: backward adds to them (micro-batches), nnt_layer_zero_grad clears.
 * Composite layers (MLP, block, sequential, GPT) own their children and destroy them.
 * nnt_tiling keeps nnt 0.2's size: nnt_gpt_tiling and nnt_model_tiling write it whole, so
 * a tile size of a later version comes in a structure of its own. */
typedef struct nnt_tiling {
    size_t size;                 /* sizeof(nnt_tiling), set by the init macro                */
    int64_t batch, seq, channels, hidden, vocab, heads, head_dim;
} nnt_tiling;

#define NNT_TILING_INIT { sizeof(nnt_tiling), 0, 0, 0, 0, 0, 0, 0 }

typedef enum nnt_layer_kind {
    NNT_LAYER_EMBEDDING = 1,      /* tokens (B, T) int32 -> wte[tokens] + wpe[0..T) (B, T, C)  */
    NNT_LAYER_LAYERNORM = 2,      /* (..., C) -> (..., C), eps, weight and bias              */
    NNT_LAYER_LINEAR = 3,         /* (..., in) -> (..., out) = x W^T (+ b) (then GELU)        */
    NNT_LAYER_ATTENTION = 4,      /* (B, T, C) -> causal multi-head self-attention, c_proj  */
    NNT_LAYER_MLP = 5,            /* (..., C) -> linear(C, hidden) + GELU -> linear(hidden, C) */
    NNT_LAYER_BLOCK = 6,          /* x + attn(ln_1(x)), then + mlp(ln_2(.)) (pre-LN)         */
    NNT_LAYER_LM_HEAD = 7,        /* (..., C) -> (..., V) = x wte^T, wte of an embedding      */
    NNT_LAYER_CROSS_ENTROPY = 8,  /* logits (..., V) -> per-position losses (...)            */
    NNT_LAYER_SEQUENTIAL = 9,     /* children applied in order                               */
    NNT_LAYER_GPT = 10,           /* a whole GPT-2 model: nnt_gpt_create                      */
    NNT_LAYER_RMSNORM = 11,       /* (..., C) -> (..., C), eps, weight (new in 0.3)           */
    NNT_LAYER_MODEL = 12,         /* a transformer of nnt_model_create (new in 0.3)           */
    NNT_LAYER_SOFTCAP = 13,       /* (...) -> tanh(x / cap) cap: Gemma 2's final logits (0.3) */
    NNT_LAYER_SCALE = 14,         /* (...) -> x / d in place: Granite's logits (0.3)          */
    NNT_LAYER_PAIRWISE = 15,      /* scores (B, ..., 1) -> the pairwise loss of reward models
                                     (nnt_layer_pairwise_create; 0.3)                          */
    NNT_LAYER_LABEL_VALUES = 16   /* logits (B, ..., L) -> the regression or multi-label loss
                                     of classifiers (nnt_layer_label_values_create; 0.4)      */
} nnt_layer_kind;

/* Flags of nnt_layer_linear_create. */
#define NNT_LINEAR_BIAS 1u        /* add a bias (out)                                         */
#define NNT_LINEAR_GELU 2u        /* GELU (tanh approximation) on the output, fused          */
#define NNT_LINEAR_GELU_ERF 4u    /* the exact GELU x Phi(x) on the output, fused (not with
                                     NNT_LINEAR_GELU). New in 0.3.                           */

/* One parameter of a layer, as listed by nnt_layer_param. The strings and tensors belong
 * to the layer. */
typedef struct nnt_param_info {
    size_t size;                 /* sizeof(nnt_param_info): set it before the call           */
    const char *name;            /* unique within the layer tree, e.g. "h.3.mlp.c_fc.weight" */
    nnt_tensor *value;           /* the parameter: NNT_FP32 (NNT_BF16: a frozen matrix kept
                                    in bf16 under bf16 products, nnt_layer_freeze)         */
    nnt_tensor *grad;            /* its gradient, same shape and tiling; NULL when frozen    */
    int decay;                   /* 1: weight decay applies by default (matrices and
                                    embeddings), 0: biases and LayerNorm parameters          */
    /* new in 0.3 (a size without it, as 0.2 set, gets the fields above only) */
    int frozen;                  /* 1: frozen by nnt_layer_freeze (no gradient)              */
} nnt_param_info;

/* Creation. tiling may be NULL (automatic). Parameters are created uninitialised-but-defined:
 * weights by nnt_layer_init's rule with seed 0, so a fresh layer can be used at once.
 * Embedding: max_seq 0 (new in 0.3) means no position table ("wpe.weight"): any T. Its
 * forward refuses (NNT_E_INVAL, naming the id, its place and V) token ids outside [0, V)
 * whose values came from the host (nnt_tensor_copy_from_host, nnt_tensor_fill: their range
 * is kept as they are copied in, so nothing is read back); ids tasks wrote are not checked. */
NNT_API int nnt_layer_embedding_create(nnt_ctx *ctx, int64_t vocab, int64_t max_seq,
                                       int64_t channels, const nnt_tiling *tiling,
                                       nnt_layer **out);
NNT_API int nnt_layer_layernorm_create(nnt_ctx *ctx, int64_t channels, double eps,
                                       const nnt_tiling *tiling, nnt_layer **out);
NNT_API int nnt_layer_linear_create(nnt_ctx *ctx, int64_t in, int64_t out_features,
                                    unsigned flags, const nnt_tiling *tiling,
                                    nnt_layer **out);
NNT_API int nnt_layer_attention_create(nnt_ctx *ctx, int64_t channels, int64_t heads,
                                       const nnt_tiling *tiling, nnt_layer **out);
NNT_API int nnt_layer_mlp_create(nnt_ctx *ctx, int64_t channels, int64_t hidden,
                                 const nnt_tiling *tiling, nnt_layer **out);
NNT_API int nnt_layer_block_create(nnt_ctx *ctx, int64_t channels, int64_t heads,
                                   int64_t hidden, const nnt_tiling *tiling, nnt_layer **out);
/* The LM head shares (ties) the token-embedding matrix of `embedding` (an
 * NNT_LAYER_EMBEDDING layer): it has no parameter of its own, its gradient is added to the
 * embedding's. The embedding must outlive the head (put both in one sequential). */
NNT_API int nnt_layer_lm_head_create(nnt_layer *embedding, nnt_layer **out);
/* Mean cross-entropy over the positions whose target is not ignore_index. Set the targets
 * with nnt_layer_set_targets before forward. */
NNT_API int nnt_layer_cross_entropy_create(nnt_ctx *ctx, int32_t ignore_index,
                                           nnt_layer **out);
/* The loss of reward models as TRL's RewardTrainer trains them (Bradley-Terry): logits
 * (B, ..., 1), one score a position, and targets (B, ...) int32 of which each row holds
 * exactly one that is not ignore_index, marking the row's pooled position (its value is not
 * used; nnt_model_pool_targets). Rows 2p and 2p + 1 are the chosen and the rejected sequence
 * of pair p (B even); with r their scores at the pooled positions the loss is the mean over
 * the P = B / 2 pairs of -log sigmoid(r_2p - r_2p+1), plus center (>= 0; 0: none) times
 * the mean of (r_2p + r_2p+1)^2 (TRL's center_rewards_coefficient).
 * nnt_layer_set_targets_ex's divisor replaces P (gradient accumulation). New in 0.3. */
NNT_API int nnt_layer_pairwise_create(nnt_ctx *ctx, int32_t ignore_index, double center,
                                      nnt_layer **out);
/* The center of layer's pairwise loss (the layer's own, or its model's: a reward model's
 * loss is created with center 0); NNT_E_INVAL when it has none. New in 0.3. */
NNT_API int nnt_layer_set_pairwise_center(nnt_layer *layer, double center);
/* What a classifier is trained for (nnt_model_config.problem_type, transformers'
 * problem_type; the loss of nnt_layer_label_values_create). New in 0.4. */
#define NNT_PROBLEM_DEFAULT 0     /* num_labels >= 2: one label a row, the cross-entropy over
                                     the labels ("single_label_classification"); 1: a reward
                                     model's pairwise loss (nnt_layer_pairwise_create)        */
#define NNT_PROBLEM_REGRESSION 1  /* "regression": the mean squared error between the pooled
                                     logits and num_labels values a row                        */
#define NNT_PROBLEM_MULTI_LABEL 2 /* "multi_label_classification": the mean over the labels and
                                     rows of the binary cross-entropy of sigmoid(logit) against
                                     a value in [0, 1] a label (1: the row has it)             */
/* The loss of a classifier trained on values (transformers' regression and multi-label
 * classification): logits (B, ..., L), targets (B, ...) int32 of which each row holds exactly
 * one that is not ignore_index, marking the row's pooled position (its value is not used;
 * nnt_model_pool_targets), and L values a row (nnt_layer_set_label_values). With z the logits
 * at the pooled positions and y the values, the loss is the mean over the B rows and L labels
 * of (z - y)^2 (problem NNT_PROBLEM_REGRESSION: torch's MSELoss) or of
 * max(z, 0) - z y + log(1 + exp(-|z|)) (NNT_PROBLEM_MULTI_LABEL: BCEWithLogitsLoss);
 * nnt_layer_set_targets_ex's divisor replaces B (gradient accumulation). New in 0.4. */
NNT_API int nnt_layer_label_values_create(nnt_ctx *ctx, int32_t ignore_index, int problem,
                                          nnt_layer **out);
/* The values (B, L) row by row (n = B * L floats, copied) the next forwards of layer's
 * label-values loss (the layer's own, or its model's: a classifier of problem_type
 * NNT_PROBLEM_REGRESSION or NNT_PROBLEM_MULTI_LABEL) compare the pooled logits with; finite,
 * and in [0, 1] for multi-label. NULL: forget them (a forward with targets then fails,
 * NNT_E_STATE). NNT_E_INVAL when layer has no such loss. New in 0.4. */
NNT_API int nnt_layer_set_label_values(nnt_layer *layer, const float *values, int64_t n);
/* A chain of n children; takes ownership of them (also on failure: they are destroyed). */
NNT_API int nnt_layer_sequential_create(nnt_ctx *ctx, int n, nnt_layer *const *children,
                                        nnt_layer **out);
/* Release the layer, its children and everything it owns (waits for pending work). */
NNT_API void nnt_layer_destroy(nnt_layer *layer);

NNT_API int nnt_layer_kind_of(const nnt_layer *layer, nnt_layer_kind *kind);
/* Number of direct children (0 for a leaf) and the i-th one (owned by layer). */
NNT_API int nnt_layer_num_children(const nnt_layer *layer, int *n);
NNT_API int nnt_layer_child(nnt_layer *layer, int i, nnt_layer **child);

/* Targets (..., ) int32 of a layer ending in a cross-entropy (the cross-entropy layer, a
 * sequential ending with one, a GPT). The tensor is copied. NULL: forget them (forward then
 * computes no loss). */
NNT_API int nnt_layer_set_targets(nnt_layer *layer, nnt_tensor *targets);
/* As nnt_layer_set_targets; the forwards with these targets divide the summed cross-entropy
 * of the counted targets (those not ignore_index) by divisor (> 0) for the loss and its
 * gradient, instead of by their number (divisor 0, and nnt_layer_set_targets: the mean).
 * For gradient accumulation as transformers does it (a step's loss is the sum over all its
 * micro-batches divided by the step's counted targets N, num_items_in_batch), give every
 * micro-batch N / accum_steps: the optimizer divides the summed gradients by accum_steps. */
NNT_API int nnt_layer_set_targets_ex(nnt_layer *layer, nnt_tensor *targets, double divisor);
/* Packed rows (several examples in a row, as TRL's padding-free packing trains them): the
 * position of every token in its example, positions (B, T) NNT_INT32 of the input's B and T
 * (Hugging Face's position_ids, 0 at each example's first token, then 1, 2, ...). The next
 * forwards of layer's tree (and their backwards) use them: rotary positions (Llama, Gemma,
 * MoE families) and GPT-2's position table read them, and attention lets a token see the
 * earlier tokens of its own example only (i - p .. i for position p; a window still applies).
 * Not copied: the tensor must stay alive, unchanged and set until the backwards of those
 * forwards are submitted (recomputing blocks read it again). NULL: positions 0 .. T-1 of
 * one sequence a row again (the default). Generation (nnt_model_generate) ignores them. */
NNT_API int nnt_layer_set_positions(nnt_layer *layer, nnt_tensor *positions);
/* y = layer(x). y (may be NULL) gets the layer's output tensor (see above). For a layer
 * with targets, forward also computes the mean loss (nnt_layer_loss). */
NNT_API int nnt_layer_forward(nnt_layer *layer, nnt_tensor *x, nnt_tensor **y);
/* Mean loss of the last forward with targets (waits for it). */
NNT_API int nnt_layer_loss(nnt_layer *layer, double *loss);
/* The loss of each target of the last forward with targets (new in 0.3): n (the targets'
 * count, B * T for (B, T) targets) losses -log p(target) in the targets' order, 0 for
 * ignored ones (waits for the forward). E.g. a sequence's log-likelihood, the sum of its
 * counted targets' losses negated. */
NNT_API int nnt_layer_target_losses(nnt_layer *layer, float *losses, int64_t n);
/* Weights of the targets of the last forward with targets for the backward that follows
 * (new in 0.3): it then computes the gradient of sum_t weights[t] * loss_t / divisor (the
 * divisor of nnt_layer_set_targets_ex, else the counted targets' number) instead of the
 * plain mean. n: the targets' count; weights finite, copied; NULL: every weight 1 again (n
 * not checked).
 * nnt_layer_set_targets resets them to 1; nnt_layer_loss stays the unweighted loss. Used by
 * losses made of per-sequence log-likelihoods (preference optimization, nnt_trainer's
 * dpo_beta): d loss / d loss_t given as weights. */
NNT_API int nnt_layer_set_target_weights(nnt_layer *layer, const float *weights, int64_t n);
/* Label smoothing of the cross-entropy layer that takes layer's targets (new in 0.4): the
 * next forwards' losses (nnt_layer_loss, nnt_layer_target_losses) and their backwards are
 * those of nnt_tensor_cross_entropy_smoothed with this epsilon in [0, 1) (transformers'
 * label_smoothing_factor); 0 (a new layer's): none. NNT_E_INVAL when layer computes no
 * cross-entropy (a classifier's or reward model's pooled loss, no loss layer). */
NNT_API int nnt_layer_set_label_smoothing(nnt_layer *layer, double epsilon);
/* NEFTune (new in 0.4): noisy embeddings for fine-tuning, as transformers' Trainer adds them
 * with neftune_noise_alpha: the next forwards that train (not a trainer's validations nor
 * generation) add to the output (B, T, C) of the first embedding layer of layer's tree
 * (after its scale: Gemma's sqrt(C)) noise uniform in [-alpha / sqrt(T C), alpha / sqrt(T C)],
 * a new draw each forward (each of a trainer's micro-batches: its number, so a resumed run
 * draws the same), from seed; the backward is unchanged (the noise is a constant). alpha 0:
 * none (a new layer's). NNT_E_INVAL: alpha negative or not finite, no embedding layer. */
NNT_API int nnt_layer_set_neftune(nnt_layer *layer, double alpha, uint64_t seed);
/* Given dy = d loss / d y of the last forward (NULL for a layer with targets: the gradient
 * of the mean loss), add the parameter gradients and return dx = d loss / d x (owned by
 * the layer; dx may be NULL; the embedding has no dx and sets *dx = NULL). Each backward
 * needs its own forward (NNT_E_STATE otherwise). */
NNT_API int nnt_layer_backward(nnt_layer *layer, nnt_tensor *dy, nnt_tensor **dx);
NNT_API int nnt_layer_zero_grad(nnt_layer *layer);
/* Like nnt_layer_zero_grad for the next backward, which then writes the gradients instead of
 * adding to them (the same results), but a layer may drop them instead of zero-filling:
 * until that backward they may be unreadable (NNT_E_STATE). GPT layers drop their weight
 * and bias matrices' gradients; since 0.3 linear and attention layers (so also the MLPs,
 * blocks and models made of them) drop their weights' and biases', embeddings their token
 * table's: no zero-fill pass runs for them, and under a memory budget they are neither
 * kept nor written to disk. Norms and position tables zero-fill. A new layer's gradients are
 * in that state from creation since 0.3: those of linear maps and attention take no memory
 * until a backward writes them (a frozen base's never do), the others are zero. */
NNT_API int nnt_layer_clear_grad(nnt_layer *layer);
/* Parameters of the whole tree, each once (a tied matrix belongs to its embedding): count
 * of tensors and total number of elements; either pointer may be NULL. */
NNT_API int nnt_layer_num_params(const nnt_layer *layer, int64_t *count, int64_t *numel);
NNT_API int nnt_layer_param(nnt_layer *layer, int64_t i, nnt_param_info *info);
/* nnt_layer_freeze's freeze argument (new in 0.3; any other non-zero value is NNT_FREEZE). */
typedef enum nnt_freeze_mode {
    NNT_UNFREEZE = 0,
    NNT_FREEZE = 1,             /* frozen; a matrix only products read (a linear's or an
                                   attention projection's weight) is kept in bf16 only: from
                                   its freezing when the context's precision is then
                                   NNT_PRECISION_BF16, else from the first product that
                                   reads it under it; a token table whose values are all
                                   bf16 values too, from the first forward under it */
    NNT_FREEZE_KEEP_FP32 = 2,   /* frozen, its fp32 values kept whatever the precision      */
    NNT_FREEZE_NF4 = 3          /* frozen; a matrix only products read is kept in NF4
                                   (NNT_NF4, 4.5 bits an element: QLoRA's base) whatever the
                                   precision, from its freezing; other parameters as
                                   NNT_FREEZE; an untied lm_head too (bitsandbytes leaves
                                   it). The matrix's tiles must hold whole blocks (its
                                   inputs' tile a multiple of 64), else NNT_E_SHAPE naming
                                   it, before anything changes. New in 0.4                  */
} nnt_freeze_mode;
/* Freeze (freeze 1) or unfreeze (0) every parameter of the tree whose full name matches the
 * glob pattern (fnmatch(3) without flags: * and ? match dots too; "*" is every parameter,
 * "*.mlp.*" the MLPs', "model.layers.0.*" a block's); in a model also those whose tensor in
 * the family's Hugging Face files has a matching name (new in 0.3: GPT-NeoX's q, k, v
 * "*.attention.query_key_value.*", GPT-2's "transformer.h.0.attn.c_attn.*"). A frozen
 * parameter has no gradient tensor (nnt_param_info.grad NULL; its memory is released),
 * nnt_optim_add_layer skips it (no optimizer state), and the backward computes no gradient
 * for it: through a frozen matrix only the input gradient flows (one product of the
 * linear's three). Unfreezing gives
 * it a zero gradient again. count (may be NULL) gets the number of parameters matched; a
 * pattern that matches none is NNT_E_INVAL naming it. Between a forward and its backward, the
 * backward follows the new state. An optimizer sees the parameters frozen when it adds them:
 * freeze before nnt_optim_add_layer (the gradient of a parameter frozen after is destroyed
 * while the optimizer still holds it). Kept in bf16 (NNT_FREEZE, bf16 products): such a
 * matrix's value becomes an NNT_BF16 tensor holding its fp32 values rounded to nearest even,
 * the bits every bf16 product read of it already, so results do not change; it takes 2 bytes
 * an element instead of 4 plus the 2 of the bf16 copy the products read otherwise. Its fp32
 * values are gone: products in another precision, the model files (widened to fp32) and
 * unfreezing (widened again) see the rounded values; NNT_FREEZE_KEEP_FP32 keeps them. New in
 * 0.3. */
NNT_API int nnt_layer_freeze(nnt_layer *layer, const char *pattern, int freeze,
                             int64_t *count);
/* GPT-2 initialisation of every parameter of the tree, deterministic in seed (and
 * independent of the tiling): matrices and embeddings normal(0, 0.02), except the output
 * projections of attention and MLP inside blocks normal(0, 0.02 / sqrt(2 L)) where L is
 * the number of blocks in the tree; biases 0; LayerNorm weight 1, bias 0. */
NNT_API int nnt_layer_init(nnt_layer *layer, uint64_t seed);

/* RMSNorm layer (NNT_LAYER_RMSNORM): (..., C) -> (..., C) = x * rstd * weight, as
 * nnt_tensor_rmsnorm. Parameter "weight" (C), initialised to 1, no weight decay. eps > 0. */
NNT_API int nnt_layer_rmsnorm_create(nnt_ctx *ctx, int64_t channels, double eps,
                                     const nnt_tiling *tiling, nnt_layer **out);

/* Normalisation of a block (nnt_block_options.norm). */
typedef enum nnt_norm_kind {
    NNT_NORM_LAYERNORM = 0,       /* GPT-2: weight and bias                                 */
    NNT_NORM_RMSNORM = 1          /* Llama: weight only                                     */
} nnt_norm_kind;

/* Kind of MLP (nnt_mlp_options.kind). */
typedef enum nnt_mlp_kind {
    NNT_MLP_GELU = 0,             /* GPT-2: c_proj(gelu(c_fc(x)))                           */
    NNT_MLP_SWIGLU = 1,           /* Llama: down_proj(silu(gate_proj(x)) * up_proj(x))      */
    NNT_MLP_GEGLU = 2,            /* Gemma: down_proj(gelu_tanh(gate_proj(x)) * up_proj(x)) */
    NNT_MLP_MOE = 3,              /* mixture of SwiGLU experts (expert_kind): children "gate"
                                     (the router, C -> experts; "router" with bias) and
                                     "experts.<e>" (hidden: each expert's);
                                     each token through its experts_per_token experts of
                                     highest softmax(gate(x)), weighted (nnt_layer_mlp_create_ex(3)) */
    NNT_MLP_GELU_ERF = 4,         /* GPT-NeoX: c_proj(gelu(c_fc(x))) with the exact GELU
                                     x Phi(x) (nnt_tensor_gelu_erf). New in 0.3.            */
    NNT_MLP_SWIGLU_CLAMP = 5      /* gpt-oss: down_proj(gc sigmoid(alpha gc) (uc + 1)) with
                                     gc = min(gate_proj(x), limit), uc = clamp(up_proj(x),
                                     -limit, limit) (swiglu_alpha, swiglu_limit); children
                                     as NNT_MLP_SWIGLU's. New in 0.3.                       */
} nnt_mlp_kind;

/* Options of nnt_layer_attention_create_ex. Read at create time and copied (rope too). */
typedef struct nnt_attention_options {
    size_t size;                  /* sizeof(nnt_attention_options), set by the init macro   */
    int64_t kv_heads;             /* key/value heads NKV dividing heads; 0: = heads          */
    int qkv_bias;                 /* biases on the q, k, v projections                      */
    int out_bias;                 /* bias on the output projection                          */
    const nnt_rope_options *rope; /* rotary positions on q and k; NULL: none                */
    int64_t head_dim;             /* hd, the size of each head's q, k, v vectors; 0:
                                     channels / heads (which then must divide); any other
                                     hd makes q (NH, hd, C), o_proj (C, NH, hd)             */
    int qk_norm;                  /* RMSNorm over each head vector of q and of k, before the
                                     rotation (Qwen3): parameters "q_norm.weight",
                                     "k_norm.weight" (hd), initialised to 1, no decay; 2:
                                     one RMSNorm over each token's whole q (k) projection,
                                     weights (NH hd), (NKV hd), heads untiled (OLMoE)       */
    double qk_norm_eps;           /* that RMSNorm's eps, > 0                                */
    int64_t window;               /* sliding window W: position i attends keys i - W < j <= i
                                     (nnt_tensor_attention_ex(3)); 0: none                  */
    double scale;                 /* scores scale * q.k; 0: 1 / sqrt(hd) (Gemma:
                                     query_pre_attn_scalar^-0.5)                             */
    double softcap;               /* > 0: scores soft-capped, softcap tanh(s / softcap)
                                     (Gemma 2's attn_logit_softcapping); 0: none            */
    int qk_norm_plus_one;         /* the q/k norms scale by 1 + weight, weights initialised
                                     to 0 (Gemma 3)                                          */
    int llama_names;              /* 1: the Llama layout's names (q_proj, k_proj, v_proj,
                                     o_proj) whatever the other options say; 0: GPT-2's (q,
                                     k, v, c_proj; LoRA's c_attn) when the options are
                                     GPT-2's (multi-head, all biases, no rope, no q/k norms),
                                     else the Llama layout's (a SmolLM3 block without rope
                                     and with biases: 1)                                     */
    int fused_qkv;                /* with the Llama layout's names: LoRA adapts q_proj,
                                     k_proj and v_proj as one module "qkv_proj" (one A, B
                                     their rows one after the other: Phi-3's files and
                                     PEFT's adapters of them); 0: each its own              */
    /* appended in 0.3 (a size that ends before it: 0) */
    int sinks;                    /* attention sinks (gpt-oss): a parameter "sinks" (NH), a
                                     logit per head in each row's softmax with no value
                                     (nnt_tensor_attention_ex(3)), initialised normal(0,
                                     0.02), weight decay as the weights'; 0: none            */
} nnt_attention_options;

/* GPT-2's attention: multi-head, all biases, no rotary positions, no window. */
#define NNT_ATTENTION_OPTIONS_INIT \
    { sizeof(nnt_attention_options), 0, 1, 1, NULL, 0, 0, 1e-6, 0, 0.0, 0.0, 0, 0, 0, 0 }

/* Options of nnt_layer_mlp_create_ex. */
typedef struct nnt_mlp_options {
    size_t size;                  /* sizeof(nnt_mlp_options), set by the init macro         */
    int kind;                     /* nnt_mlp_kind                                           */
    int bias;                     /* biases on the projections; NNT_MLP_MOE: gpt-oss's
                                     layout, the router "router" with a bias and biases on
                                     every expert's projections (0: the router "gate", no
                                     bias anywhere)                                          */
    /* NNT_MLP_MOE only */
    int64_t experts;              /* E routed experts                                       */
    int64_t experts_per_token;    /* k <= E (num_experts_per_tok)                           */
    int norm_topk_prob;           /* the k weights divided by their sum                     */
    double router_aux_coef;       /* > 0: the load-balancing loss (transformers'
                                     load_balancing_loss_func over the model's MoE layers)
                                     times this is part of the model's loss                  */
    int64_t shared_expert_hidden; /* > 0: a shared SwiGLU expert of this inner size on every
                                     token, children "shared_expert" and
                                     "shared_expert_gate" (linear C -> 1, no bias); the
                                     output is the routed sum + sigmoid(shared_expert_gate(x))
                                     shared_expert(x) (Qwen2-MoE); 0: none                    */
    int fused_gate_up;            /* NNT_MLP_SWIGLU, _GEGLU, _SWIGLU_CLAMP: LoRA adapts
                                     gate_proj and up_proj as one module "gate_up_proj" of
                                     the MLP (one A, B their rows one after the other:
                                     Phi-3's files and PEFT's adapters of them); 0: each its
                                     own                                                     */
    /* New in 0.3 after fused_gate_up: a size that ends before them reads them as 0. */
    double swiglu_alpha;          /* NNT_MLP_SWIGLU_CLAMP (and such experts): alpha > 0; 0:
                                     gpt-oss's 1.702                                         */
    double swiglu_limit;          /* NNT_MLP_SWIGLU_CLAMP (and such experts): limit > 0; 0:
                                     gpt-oss's 7.0                                           */
    int expert_kind;              /* NNT_MLP_MOE: the routed experts' kind, 0 or
                                     NNT_MLP_SWIGLU (SwiGLU) or NNT_MLP_SWIGLU_CLAMP
                                     (gpt-oss's); the shared expert stays SwiGLU             */
} nnt_mlp_options;

#define NNT_MLP_OPTIONS_INIT \
    { sizeof(nnt_mlp_options), NNT_MLP_GELU, 1, 0, 0, 0, 0.0, 0, 0, 0.0, 0.0, 0 }

/* Options of nnt_layer_block_create_ex. */
typedef struct nnt_block_options {
    size_t size;                  /* sizeof(nnt_block_options), set by the init macro       */
    int norm;                     /* nnt_norm_kind of both norms                            */
    double norm_eps;              /* > 0 (LayerNorm: >= 0)                                  */
    const nnt_attention_options *attention;  /* NULL: NNT_ATTENTION_OPTIONS_INIT            */
    const nnt_mlp_options *mlp;   /* NULL: NNT_MLP_OPTIONS_INIT                             */
    int norm_plus_one;            /* RMSNorms scale by 1 + weight, weights initialised to 0
                                     (Gemma)                                                 */
    int sandwich_norms;           /* 1: four norms (Gemma 2 and 3): x + post(attn(input(x))),
                                     then + post_ff(mlp(pre_ff(.))); RMSNorm blocks only:
                                     children input_layernorm, self_attn,
                                     post_attention_layernorm, pre_feedforward_layernorm,
                                     mlp, post_feedforward_layernorm; 2: the two after each
                                     part alone (OLMo 2): x + post(attn(x)), then +
                                     post_ff(mlp(.)): children self_attn, mlp,
                                     post_attention_layernorm, post_feedforward_layernorm    */
    int parallel;                 /* 1: the attention and the MLP side by side on one norm of
                                     the input (Phi, GPT-J): x + (attn(n(x)) + mlp(n(x)));
                                     children input_layernorm, self_attn, mlp; 2: side by
                                     side, each on a norm of its own (GPT-NeoX): x +
                                     (attn(n1(x)) + mlp(n2(x))), children input_layernorm,
                                     self_attn, post_attention_layernorm, mlp; not with
                                     sandwich_norms. New in 0.3.                             */
    double residual_scale;        /* > 0: each part's output times it before its residual sum
                                     (Granite's residual_multiplier); 0: 1. Not with
                                     parallel. New in 0.3.                                   */
} nnt_block_options;

#define NNT_BLOCK_OPTIONS_INIT \
    { sizeof(nnt_block_options), NNT_NORM_LAYERNORM, 1e-5, NULL, NULL, 0, 0, 0, 0.0 }

/* The attention, MLP and block layers with options (NULL: the INIT values, which give
 * exactly nnt_layer_attention_create / _mlp_create / _block_create). Without GPT-2's options
 * the parameters take Hugging Face Llama's names: attention "q_proj.weight" (NH, hd, C),
 * "k_proj.weight", "v_proj.weight" (NKV, hd, C), "o_proj.weight" (C, NH, hd), biases
 * "q_proj.bias" ...; the SwiGLU MLP has linear children "gate_proj", "up_proj" (C -> hidden)
 * and "down_proj" (hidden -> C); an RMSNorm block, and a LayerNorm block whose attention
 * has llama_names 1 (StableLM's), has children "input_layernorm", "self_attn",
 * "post_attention_layernorm", "mlp". See nnt_layer_block_create_ex(3). */
NNT_API int nnt_layer_attention_create_ex(nnt_ctx *ctx, int64_t channels, int64_t heads,
                                          const nnt_attention_options *opts,
                                          const nnt_tiling *tiling, nnt_layer **out);
NNT_API int nnt_layer_mlp_create_ex(nnt_ctx *ctx, int64_t channels, int64_t hidden,
                                    const nnt_mlp_options *opts, const nnt_tiling *tiling,
                                    nnt_layer **out);
NNT_API int nnt_layer_block_create_ex(nnt_ctx *ctx, int64_t channels, int64_t heads,
                                      int64_t hidden, const nnt_block_options *opts,
                                      const nnt_tiling *tiling, nnt_layer **out);

/* Activation recompute for every transformer block of a layer tree (the layer itself, a
 * model, a sequential; a GPT layer: nnt_gpt_set_recompute). enable != 0: each block keeps
 * only its output for the backward and drops the rest once its forward is done (under a
 * memory budget StarPU reuses that memory); its backward first reruns the block's forward
 * from the block's input, so a step does about one more forward of work, with bit-identical
 * losses and gradients. 0 (the default) keeps every activation. NNT_E_INVAL for a tree
 * without a block; NNT_E_STATE when turning it off while a block that dropped its
 * activations still awaits its backward. */
NNT_API int nnt_layer_set_recompute(nnt_layer *layer, int enable);


/* ---- optimizers and training state ------------------------------------------------------ */
typedef enum nnt_optim_kind {
    NNT_OPTIM_ADAMW = 0,          /* decoupled weight decay (PyTorch AdamW)                  */
    NNT_OPTIM_ADAM = 1,           /* L2 weight decay added to the gradient (PyTorch Adam)    */
    NNT_OPTIM_SGD = 2             /* SGD with momentum (PyTorch SGD, dampening 0)            */
} nnt_optim_kind;

typedef enum nnt_schedule {
    NNT_SCHEDULE_CONSTANT = 0,    /* lr (after warmup)                                       */
    NNT_SCHEDULE_COSINE = 1,      /* after warmup, cosine from lr to min_lr at total_steps   */
    NNT_SCHEDULE_LINEAR = 2,      /* after warmup, a line from lr to min_lr at total_steps
                                     (transformers' "linear" with min_lr 0; new in 0.4)      */
    NNT_SCHEDULE_WSD = 3          /* warmup, stable at lr, then the last decay_steps before
                                     total_steps decay to min_lr in the decay_shape
                                     ("warmup_stable_decay"; new in 0.4)                     */
} nnt_schedule;

/* The decay of NNT_SCHEDULE_WSD over its decay_steps, with p its progress in (0, 1]
 * (new in 0.4): lr from min_lr + (lr - min_lr) * f(p). */
typedef enum nnt_decay_shape {
    NNT_DECAY_LINEAR = 0,         /* f = 1 - p                                               */
    NNT_DECAY_COSINE = 1,         /* f = (1 + cos(pi p)) / 2                                 */
    NNT_DECAY_SQRT = 2            /* f = 1 - sqrt(p) ("1-sqrt", Hagele et al. 2024)          */
} nnt_decay_shape;

typedef struct nnt_optim_options {
    size_t size;                 /* sizeof(nnt_optim_options), set by the init macro         */
    nnt_optim_kind kind;
    double lr;                   /* peak learning rate                                       */
    double beta1, beta2, eps;    /* Adam(W)                                                  */
    double momentum;             /* SGD                                                      */
    double weight_decay;         /* on parameters whose decay flag is set                    */
    double grad_clip;            /* > 0: clip the global L2 norm of all gradients to this    */
    nnt_schedule schedule;
    int64_t warmup_steps;        /* linear warmup: lr * s / warmup_steps for steps s <= it   */
    int64_t total_steps;         /* cosine, linear, WSD: steps until min_lr (then min_lr)    */
    double min_lr;
    int64_t accum_steps;         /* >= 1: gradients hold the sum over this many micro-batch
                                    backwards and are divided by it before clipping          */
    /* new in 0.4 */
    int64_t decay_steps;         /* WSD: the steps of the decay, ending at total_steps
                                    (>= 1, <= total_steps - warmup_steps)                    */
    nnt_decay_shape decay_shape; /* WSD: the decay's shape (default NNT_DECAY_LINEAR)        */
} nnt_optim_options;

#define NNT_OPTIM_OPTIONS_INIT \
    { sizeof(nnt_optim_options), NNT_OPTIM_ADAMW, 3e-4, 0.9, 0.999, 1e-8, 0.0, 0.0, 0.0, \
      NNT_SCHEDULE_CONSTANT, 0, 0, 0.0, 1, 0, NNT_DECAY_LINEAR }

NNT_API int nnt_optim_create(nnt_ctx *ctx, const nnt_optim_options *opts, nnt_optim **out);
NNT_API void nnt_optim_destroy(nnt_optim *opt);
/* Add a parameter (value and grad of one shape and tiling; name unique in this optimizer;
 * decay: whether weight_decay applies). The tensors must outlive the optimizer. Only before
 * the first update (NNT_E_STATE after it, or after loading a state with updates). */
NNT_API int nnt_optim_add_param(nnt_optim *opt, const char *name, nnt_tensor *value,
                                nnt_tensor *grad, int decay);
/* Add every parameter of a layer tree with its name and default decay flag (all or none). */
NNT_API int nnt_optim_add_layer(nnt_optim *opt, nnt_layer *layer);
/* Turn weight decay on or off for one parameter by name (NNT_E_INVAL if unknown). */
NNT_API int nnt_optim_set_decay(nnt_optim *opt, const char *name, int decay);
/* One update of every parameter: step += 1, lr from the schedule, gradients divided by
 * accum_steps, clipped to grad_clip, then the optimizer's rule. Gradients are not zeroed.
 * Clipping as PyTorch's clip_grad_norm_: with norm the global L2 norm (after the division),
 * gradients are scaled by grad_clip / (norm + 1e-6) when that is < 1. The norm is computed
 * also without clipping (stats): one wait for the gradients per update. */
NNT_API int nnt_optim_step(nnt_optim *opt);
/* Update each parameter during the next backward, as soon as that backward has submitted
 * the last task writing its gradient, and drop the gradient at once: under a memory budget
 * the weights and moments are then read and written once a step, while they are in memory,
 * and gradients never go to disk. Call it after the forward and before the backward of the
 * step's last micro-batch (nnt_optim_step after that backward completes the step: the
 * parameters not updated yet, the statistics). Parameters, moments and stats are bit for
 * bit those of a plain nnt_optim_step. Needs grad_clip 0 (NNT_E_STATE otherwise: the
 * clipping factor needs every gradient first) and the parameters added with
 * nnt_optim_add_layer (which says when a gradient is complete); the layers must be alive.
 * The updated parameters' gradients hold nothing afterwards (nnt_layer_clear_grad before
 * the next backward, as every step does). */
NNT_API int nnt_optim_update_in_backward(nnt_optim *opt);

typedef struct nnt_optim_stats {
    size_t size;                 /* sizeof(nnt_optim_stats): set it before the call          */
    int64_t step;                /* updates done                                             */
    double lr;                   /* learning rate of the last update                         */
    double grad_norm;            /* global gradient norm of the last update, before clipping
                                    (after the division by accum_steps); 0 before any step
                                    and after a load                                         */
} nnt_optim_stats;

NNT_API int nnt_optim_stats_get(const nnt_optim *opt, nnt_optim_stats *stats);
/* Learning rate the schedule gives at update number step (>= 1). */
NNT_API int nnt_optim_lr_at(const nnt_optim *opt, int64_t step, double *lr);

typedef struct nnt_train_state {
    size_t size;                 /* sizeof(nnt_train_state), set by the init macro           */
    uint64_t data_pos;           /* position in the training data (the caller's meaning)     */
    uint64_t rng[4];             /* the caller's RNG state                                   */
    char *options;               /* NUL-terminated string or NULL; after a load, allocated
                                    by the library: release with nnt_train_state_clear       */
} nnt_train_state;

#define NNT_TRAIN_STATE_INIT { sizeof(nnt_train_state), 0, { 0, 0, 0, 0 }, NULL }

/* Save every parameter of opt, its optimizer state (moments, step) and *st (may be NULL) to
 * one safetensors file, through a temporary file, fsync and rename. The format is in
 * nnt_train_state_save(3); the optimizer's hyper-parameters are not saved. */
NNT_API int nnt_train_state_save(nnt_optim *opt, const char *path, const nnt_train_state *st);
/* Restore what nnt_train_state_save wrote into opt's parameters (same names and shapes;
 * tilings may differ) and opt (same optimizer kind); st (may be NULL) gets the caller's
 * section (st->options is overwritten, not freed). The file is checked completely
 * (checksums) before anything is changed: a bad file, or one of other parameters or another
 * optimizer kind, is NNT_E_FORMAT. A file saved before any update resets opt to step 0. */
NNT_API int nnt_train_state_load(nnt_optim *opt, const char *path, nnt_train_state *st);
/* Release st->options and reset *st (size kept). NULL is accepted. */
NNT_API void nnt_train_state_clear(nnt_train_state *st);
/* The caller's section of a training-state file (data position, RNG words, options string;
 * release with nnt_train_state_clear) without loading it: its metadata are checked (format,
 * version, optimizer kind, metadata checksum), its tensors are not. ctx may be NULL. */
NNT_API int nnt_train_state_info(nnt_ctx *ctx, const char *path, nnt_train_state *st);
/* The value of member key of an options string (nnt_train_state.options as nnt_trainer
 * records it, or any JSON object), searched in document order, inside the objects it holds
 * too (the trainer's "model"): a string decoded, any other value as written ("12",
 * "0.10000000000000001", "true", an object's text). Into buf (cap bytes, NUL-terminated);
 * *found 1, or 0 (buf "") when there is no such member. Malformed JSON NNT_E_FORMAT, a value
 * longer than cap - 1 bytes NNT_E_INVAL, each with a message. */
NNT_API int nnt_options_get(const char *options, const char *key, char *buf, size_t cap,
                            int *found);


/* ---- models and families ----------------------------------------------------------------
 * One configuration for every family; a model is a configuration of the layers above
 * (embedding, blocks, final norm, head, cross-entropy), not a second implementation of
 * them. A family is one entry of the library's table (nnt_model_family_info): its
 * layout, its Hugging Face architectures and names, its presets. */
/* Family of a model (nnt_model_config.family): its layout and its parameter names. */
typedef enum nnt_model_family {
    NNT_FAMILY_GPT2 = 0,          /* GPT2LMHeadModel: LayerNorm, learned positions, GELU MLP,
                                     all biases, tied head                                   */
    NNT_FAMILY_LLAMA = 1,         /* LlamaForCausalLM: RMSNorm, RoPE, SwiGLU MLP, grouped-query
                                     attention (also Mistral and its sliding window, Qwen2
                                     with qkv_bias, Qwen3 with qk_norm and head_dim, their
                                     sliding windows, SmolLM3 with blocks without rotary
                                     positions (nope_layers), SmolLM2, TinyLlama)            */
    NNT_FAMILY_GEMMA = 2,         /* Gemma3ForCausalLM, Gemma2ForCausalLM: RMSNorms scaled by
                                     1 + weight, four per block, embedding times sqrt(C),
                                     GeGLU MLP, query_pre_attn_scalar, sliding windows,
                                     soft-caps (Gemma 2), q/k norms and local rope (Gemma 3) */
    NNT_FAMILY_MOE = 3,           /* MixtralForCausalLM, Qwen3MoeForCausalLM, OlmoeForCausalLM:
                                     Llama's blocks with mixture-of-experts MLPs (experts,
                                     ...), OLMoE's q/k norms (qk_norm 2)                    */
    NNT_FAMILY_OLMO = 4,          /* Olmo2ForCausalLM, Olmo3ForCausalLM: Llama's layers with
                                     the norms after the attention and the MLP instead of
                                     before them, q/k norms over the whole projections
                                     (qk_norm 2); OLMo 3's windows and local rope           */
    NNT_FAMILY_PHI3 = 5,          /* Phi3ForCausalLM (Phi-3, Phi-3.5-mini, Phi-4-mini): Llama's
                                     layers, q, k, v in one qkv_proj and gate and up in one
                                     gate_up_proj in its files, partial rotary factors,
                                     LongRoPE, a sliding window on every layer               */
    NNT_FAMILY_PHI = 6,           /* PhiForCausalLM (Phi-1, Phi-1.5, Phi-2): one LayerNorm a
                                     block before the attention and the GELU MLP side by
                                     side, every bias, partial rotary factors (0.5 unless
                                     given), a head with a bias. New in 0.3.                 */
    NNT_FAMILY_GRANITE = 7,       /* GraniteForCausalLM (IBM Granite 3): Llama's layers with
                                     an embedding multiplier, residual multiplier, attention
                                     multiplier (the scores' scale) and logits scaling. New
                                     in 0.3.                                                 */
    NNT_FAMILY_STABLELM = 8,      /* StableLmForCausalLM (StableLM 2 1.6B, StableLM 3B 4E1T):
                                     LayerNorm blocks, partial rotary factors (0.25 unless
                                     given), q, k, v biases or none, a SwiGLU MLP. New in
                                     0.3.                                                    */
    NNT_FAMILY_GPTNEOX = 9,       /* GPTNeoXForCausalLM (Pythia, GPT-NeoX-20B, RedPajama-INCITE):
                                     two LayerNorms a block before the attention and the
                                     exact-GELU MLP side by side (or one after the other:
                                     serial_blocks), q, k, v in one per-head query_key_value
                                     in its files, partial rotary factors (0.25 unless
                                     given), attention biases or none. New in 0.3.           */
    NNT_FAMILY_STARCODER2 = 10,   /* Starcoder2ForCausalLM (StarCoder2 3B, 7B, 15B): LayerNorm
                                     blocks, grouped-query attention, a tanh-GELU MLP, every
                                     bias or none, a sliding window on every layer. New in
                                     0.3.                                                    */
    NNT_FAMILY_GPTBIGCODE = 11,   /* GPTBigCodeForCausalLM (StarCoder, SantaCoder,
                                     tiny_starcoder_py): GPT-2's layout (learned positions,
                                     LayerNorm blocks, every bias) with multi-query attention
                                     (or one key/value head per head), q, k, v in one c_attn
                                     in its files, either GELU. New in 0.3.                   */
    NNT_FAMILY_FALCON = 12        /* FalconForCausalLM (Falcon-7B, -40B, -180B, Falcon2-11B):
                                     LayerNorm blocks with the attention and the GELU MLP
                                     side by side on one norm or two (parallel_norms) or
                                     one after the other (serial_blocks), multi-query or
                                     grouped-query attention with q, k, v in one
                                     query_key_value in its files, rotary positions, every
                                     bias or none. New in 0.3.                               */
} nnt_model_family;

/* What a family's configurations may set beyond the sizes (nnt_family_info.features). */
enum {
    NNT_FAMILY_HAS_KV_HEADS = 1 << 0,  /* kv_heads other than heads (grouped-query attention) */
    NNT_FAMILY_HAS_HIDDEN = 1 << 1,    /* hidden other than 4 C                               */
    NNT_FAMILY_HAS_HEAD_DIM = 1 << 2,  /* head_dim other than C / NH                          */
    NNT_FAMILY_HAS_QK_NORM = 1 << 3,   /* qk_norm                                             */
    NNT_FAMILY_HAS_ROPE = 1 << 4,      /* rotary positions: the rope options are read         */
    NNT_FAMILY_HAS_UNTIED = 1 << 5,    /* tied 0: a head of its own                           */
    NNT_FAMILY_HAS_BIASES = 1 << 6,    /* qkv_bias, out_bias, mlp_bias chosen                 */
    NNT_FAMILY_HAS_LLMC = 1 << 7,      /* llm.c checkpoints (nnt_gpt_load_llmc, _save_llmc)   */
    NNT_FAMILY_HAS_WINDOW = 1 << 8,    /* sliding windows (sliding_window, window_from, ...)   */
    NNT_FAMILY_HAS_SOFTCAP = 1 << 9,   /* attn_softcap, final_softcap                         */
    NNT_FAMILY_HAS_QUERY_SCALE = 1 << 10, /* query_pre_attn_scalar                            */
    NNT_FAMILY_HAS_LOCAL_ROPE = 1 << 11, /* rope_local_theta                                */
    NNT_FAMILY_HAS_MOE = 1 << 12,      /* mixture-of-experts MLPs (experts, ...)              */
    NNT_FAMILY_HAS_NOPE = 1 << 13,     /* blocks without rotary positions (nope_layers)       */
    NNT_FAMILY_HAS_QK_NORM_WHOLE = 1 << 14, /* qk_norm 2: q/k norms over whole projections    */
    NNT_FAMILY_HAS_PARTIAL_ROTARY = 1 << 15, /* rope.partial_rotary_factor below 1           */
    NNT_FAMILY_HAS_MULTIPLIERS = 1 << 16,/* embedding_multiplier, residual_multiplier,
                                            attention_multiplier, logits_scaling (Granite)   */
    NNT_FAMILY_HAS_SERIAL_BLOCKS = 1 << 17,/* serial_blocks (GPT-NeoX, Falcon)               */
    NNT_FAMILY_HAS_GELU_CHOICE = 1 << 18,/* mlp_gelu: the MLP's GELU either form           */
    NNT_FAMILY_HAS_PARALLEL_NORMS = 1 << 19 /* parallel_norms (Falcon)                     */
};

/* A family of the library's table (nnt_model_family_info). The strings are the library's,
 * valid for the life of the process. */
typedef struct nnt_family_info {
    size_t size;                  /* sizeof(nnt_family_info), set by the init macro          */
    int family;                   /* its nnt_model_config.family value                       */
    const char *name;             /* "gpt2", "llama"                                         */
    const char *title;            /* "GPT-2", "Llama"                                        */
    const char *architectures;    /* Hugging Face architectures it reads, ", "-separated     */
    const char *model_types;      /* their config.json model_type values                     */
    const char *presets;          /* its nnt_model_preset names                              */
    unsigned features;            /* NNT_FAMILY_HAS_* bits                                   */
} nnt_family_info;
#define NNT_FAMILY_INFO_INIT { sizeof(nnt_family_info), 0, NULL, NULL, NULL, NULL, NULL, 0 }

/* The index-th family of the library (0, 1, ... in order; NNT_E_INVAL past the last), so that
 * programs list presets and architectures and check options without naming families. */
NNT_API int nnt_model_family_info(int index, nnt_family_info *info);

typedef struct nnt_model_config {
    size_t size;                  /* sizeof(nnt_model_config), set by the init macro         */
    int family;                   /* nnt_model_family                                        */
    int64_t vocab;                /* V                                                       */
    int64_t max_seq;              /* longest sequence T; GPT-2: rows of the position table   */
    int64_t layers;               /* L                                                       */
    int64_t heads;                /* NH                                                      */
    int64_t kv_heads;             /* NKV key/value heads dividing NH; 0: NH (GPT-2: 0 or NH) */
    int64_t channels;             /* C; a multiple of NH unless head_dim is given            */
    int64_t hidden;               /* inner size of the MLP; 0: 4C                            */
    double norm_eps;              /* of every LayerNorm / RMSNorm, > 0                       */
    int tied;                     /* the head is the token embedding (GPT-2: 1)              */
    int qkv_bias;                 /* biases on q, k, v (GPT-2: 1)                            */
    int out_bias;                 /* bias on the attention output projection (GPT-2: 1)     */
    int mlp_bias;                 /* biases on the MLP's projections (GPT-2: 1)             */
    nnt_rope_options rope;        /* rotary positions (Llama family; ignored for GPT-2)      */
    int64_t head_dim;             /* hd of q, k, v; 0: C / NH (GPT-2: 0 or C / NH; Llama
                                     family: any even hd, NH * hd need not be C)            */
    int qk_norm;                  /* 1: RMSNorm on each head of q and k, eps norm_eps (Qwen3;
                                     Llama and MoE families); 2: one RMSNorm over each
                                     token's whole q and k projections (OLMoE; MoE family) */
    /* which blocks' attention has a sliding window (nnt_tensor_attention_ex(3)). Block i
     * (from 0) has one iff sliding_window > 0, i >= window_from, not (window_global_every
     * > 0 and (i + 1) % window_global_every == 0) and NNT_MODEL_WINDOW_FULL(cfg, i) is 0:
     * Mistral every block (0, 0), Qwen2/Qwen3 window_from = max_window_layers, Gemma 2
     * window_global_every 2, Gemma 3 its sliding_window_pattern; any other choice of blocks
     * (a layer_types list) in window_full_layers. Families with NNT_FAMILY_HAS_WINDOW only. */
    int64_t sliding_window;       /* W (Hugging Face's sliding_window); 0: no window         */
    int64_t window_from;          /* first block with a window                               */
    int64_t window_global_every;  /* every N-th block, counting from 1, is full; 0: none     */
    /* Gemma (families with NNT_FAMILY_HAS_QUERY_SCALE, _SOFTCAP, _LOCAL_ROPE) */
    double query_pre_attn_scalar; /* scores scaled by its -1/2 power; 0: head_dim's          */
    double attn_softcap;          /* scores soft-capped, c tanh(s / c) (Gemma 2's
                                     attn_logit_softcapping); 0: none                        */
    double final_softcap;         /* logits soft-capped (final_logit_softcapping); 0: none   */
    double rope_local_theta;      /* the rotary base of the blocks with a window, no scaling
                                     (Gemma 3's rope_local_base_freq, OLMo 3's
                                     sliding_attention rope); 0: rope for all                */
    /* mixture of experts (NNT_FAMILY_MOE): block i (from 0) has an NNT_MLP_MOE MLP iff
     * experts > 0, (i + 1) % moe_every == 0 and NNT_MODEL_DENSE_LAYER(cfg, i) is 0; the
     * other blocks a SwiGLU MLP of hidden */
    int64_t experts;              /* E routed experts per MoE block; 0: none                 */
    int64_t experts_per_token;    /* k (num_experts_per_tok)                                 */
    int64_t expert_hidden;        /* each expert's inner size (moe_intermediate_size); 0:
                                     hidden                                                  */
    int norm_topk_prob;           /* the k weights renormalised to sum 1                     */
    double router_aux_coef;       /* the load-balancing loss's weight in the loss (transformers'
                                     router_aux_loss_coef with output_router_logits); 0: none */
    int64_t moe_every;            /* decoder_sparse_step; 0 or 1: every block                */
    uint64_t dense_layers;        /* bit i: block i < 64 dense (mlp_only_layers)             */
    int64_t shared_expert_hidden; /* a shared expert of this inner size in every MoE block,
                                     gated by sigmoid (shared_expert_intermediate_size,
                                     Qwen2-MoE; nnt_mlp_options); 0: none                    */
    uint64_t dense_layers_more[7];/* bit i % 64 of word i / 64 - 1: block i dense, for
                                     64 <= i < NNT_MODEL_MAX_DENSE_LAYER                      */
    uint64_t window_full_layers[8];/* bit i % 64 of word i / 64: block i (below
                                     NNT_MODEL_MAX_WINDOW_LAYER) has no window, whatever the
                                     rule above gives it (see sliding_window); 0: the rule  */
    uint64_t nope_layers[8];      /* bit i % 64 of word i / 64: block i (below
                                     NNT_MODEL_MAX_NOPE_LAYER) has no rotary positions, its
                                     q and k as projected (SmolLM3's no_rope_layers 0 entries;
                                     families with NNT_FAMILY_HAS_NOPE); 0: rope everywhere */
    /* Granite's multipliers (families with NNT_FAMILY_HAS_MULTIPLIERS; 0: none). New in 0.3. */
    double embedding_multiplier;  /* the embedding's output times it                         */
    double residual_multiplier;   /* each block part's output times it before its residual
                                     sum: x + m attn(n(x)), then + m mlp(n(.))                */
    double attention_multiplier;  /* the scores' scale (in place of 1 / sqrt(hd))            */
    double logits_scaling;        /* the logits divided by it                                */
    /* GPT-NeoX, Falcon (families with NNT_FAMILY_HAS_SERIAL_BLOCKS). New in 0.3. */
    int serial_blocks;            /* 1: each block's attention and MLP one after the other
                                     (use_parallel_residual false, Falcon's parallel_attn
                                     false); 0: the family's arrangement (side by side)     */
    /* The MLP's GELU (families with NNT_FAMILY_HAS_GELU_CHOICE). New in 0.3. */
    int mlp_gelu;                 /* 0: the family's (GPT-NeoX, Falcon: exact; Phi,
                                     StarCoder2, GPT-BigCode: tanh);
                                     NNT_GELU_TANH, NNT_GELU_ERF                            */
    /* Falcon (families with NNT_FAMILY_HAS_PARALLEL_NORMS; taken from the room below, so the
     * size is 0.3's). New in 0.3. */
    int64_t parallel_norms;       /* the attention and the MLP side by side on 1 norm or on 2
                                     (one each: Falcon's num_ln_in_parallel_attn); 0: the
                                     family's arrangement (with serial_blocks 1: one after
                                     the other, and parallel_norms 0)                        */
    /* gpt-oss (the MoE family's GptOssForCausalLM; taken from the room below). New in 0.3. */
    int attn_sinks;               /* attention sinks: a learned logit per head in each of its
                                     softmax rows, with no value (nnt_attention_options.sinks) */
    int moe_bias;                 /* the MoE MLPs' router ("router") and every expert
                                     projection with biases (nnt_mlp_options.bias of
                                     NNT_MLP_MOE)                                             */
    double swiglu_limit;          /* > 0: the experts' activation is gpt-oss's clamped SwiGLU
                                     (NNT_MLP_SWIGLU_CLAMP) with this limit; 0: SwiGLU        */
    double swiglu_alpha;          /* its alpha (swiglu_alpha; 0: 1.702)                      */
    /* Sequence classification and reward models (Hugging Face's *ForSequenceClassification;
     * taken from the room below). New in 0.3. */
    int64_t num_labels;           /* 0: a language model (its head gives V logits a token);
                                     >= 1: a head "score" (C -> num_labels, no bias) in place
                                     of lm_head, whose loss is taken at one pooled token a
                                     row (nnt_model_pool_targets): the cross-entropy over
                                     the labels (>= 2) or, 1, the pairwise loss of reward
                                     models (nnt_layer_pairwise_create); problem_type below:
                                     a regression's or multi-label loss                     */
    int has_pad_token;            /* pad_token_id is set (config.json's pad_token_id)        */
    int64_t pad_token_id;         /* the padding id the pooling of a classifier skips        */
    /* new in 0.4 (taken from the room below) */
    int problem_type;             /* a classifier's loss: NNT_PROBLEM_DEFAULT (the cross-entropy
                                     over its labels; one label: a reward model's pairwise
                                     loss), NNT_PROBLEM_REGRESSION or NNT_PROBLEM_MULTI_LABEL
                                     (nnt_layer_label_values_create; config.json's
                                     problem_type)                                            */
    int reserved_int;             /* 0 (keeps the words below aligned)                       */
    /* 0. The library writes whole configurations (nnt_model_preset, nnt_model_config_of,
     * nnt_model_hf_config, ...) into structures the caller need not initialise, so the
     * size of this one never changes: a later version's fields take this room (0 in them
     * keeping today's behaviour), and a library older than them refuses a configuration
     * whose reserved words are not 0 (NNT_E_UNSUPPORTED). New in 0.3. */
    uint64_t reserved[56];
} nnt_model_config;

/* nnt_model_config.mlp_gelu: the tanh approximation (Hugging Face's hidden_act "gelu_new",
 * "gelu_fast", "gelu_pytorch_tanh"), or the exact GELU x Phi(x) ("gelu") */
#define NNT_GELU_TANH 1
#define NNT_GELU_ERF 2

/* mlp_only_layers: block indices below this (dense_layers, dense_layers_more) */
#define NNT_MODEL_MAX_DENSE_LAYER 512
/* 1 if block i of the configuration *cfg is in its dense list, else 0 */
#define NNT_MODEL_DENSE_LAYER(cfg, i)                                                        \
    ((i) >= 0 && (i) < NNT_MODEL_MAX_DENSE_LAYER &&                                          \
     (((i) < 64 ? (cfg)->dense_layers : (cfg)->dense_layers_more[(i) / 64 - 1]) >>          \
          ((i) % 64) & 1u))

/* window_full_layers: block indices below this */
#define NNT_MODEL_MAX_WINDOW_LAYER 512
/* 1 if block i of the configuration *cfg is in its window_full_layers list, else 0 */
#define NNT_MODEL_WINDOW_FULL(cfg, i)                                                        \
    ((i) >= 0 && (i) < NNT_MODEL_MAX_WINDOW_LAYER &&                                         \
     ((cfg)->window_full_layers[(i) / 64] >> ((i) % 64) & 1u))

/* nope_layers: block indices below this */
#define NNT_MODEL_MAX_NOPE_LAYER 512
/* 1 if block i of the configuration *cfg has no rotary positions (nope_layers), else 0 */
#define NNT_MODEL_NOPE_LAYER(cfg, i)                                                         \
    ((i) >= 0 && (i) < NNT_MODEL_MAX_NOPE_LAYER &&                                           \
     ((cfg)->nope_layers[(i) / 64] >> ((i) % 64) & 1u))

/* GPT-2 124M (nnt_model_preset "gpt2"). */
#define NNT_MODEL_CONFIG_INIT \
    { sizeof(nnt_model_config), NNT_FAMILY_GPT2, 50257, 1024, 12, 12, 0, 768, 0, 1e-5, 1, 1, 1, 1, \
      NNT_ROPE_OPTIONS_INIT, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0.0, 0, 0, 0, \
      { 0 }, { 0 }, { 0 }, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, 0.0, 0.0, 0, 0, 0, 0, 0, { 0 } }

/* Configuration of a named preset with the real shapes: "gpt2", "gpt2-medium", "gpt2-large",
 * "gpt2-xl", "tiny" (the GPT-2 demo), "llama-tiny" (L 2, C 64, NH 4, NKV 2, hidden 172,
 * V 256: tests and demos), "smollm2-135m", "tinyllama-1.1b", "llama-3.2-1b",
 * "llama-3.1-8b", "qwen3-0.6b", "smollm3-3b", "gemma3-270m", "gemma3-1b", "gemma2-2b",
 * "moe-tiny", "mixtral-8x7b", "qwen3-30b-a3b", "olmoe-1b-7b", "qwen1.5-moe-a2.7b",
 * "gpt-oss-20b", "gpt-oss-120b", "gpt-oss-tiny", "olmo2-1b", "olmo2-7b", "phi3-mini",
 * "phi4-mini", "phi-1.5", "phi-2", "stablelm-2-1.6b",
 * "stablelm-3b", "pythia-70m", "pythia-160m", "pythia-410m", "pythia-1b", "pythia-1.4b",
 * "pythia-2.8b", "pythia-6.9b", "pythia-12b", "starcoder2-3b", "starcoder2-7b",
 * "starcoder2-15b", "tiny-starcoder", "santacoder", "starcoder", "falcon-7b",
 * "falcon-40b" (each family's in
 * nnt_family_info.presets); see nnt_model_preset(3). */
NNT_API int nnt_model_preset(const char *name, nnt_model_config *cfg);
/* Resolve the 0 (automatic) entries of overrides (NULL: all automatic) for batches of
 * (B, T) on the context's workers (the heuristic of nnt_gpt_tiling(3), with the model's
 * MLP size); every entry of the result is > 0. */
NNT_API int nnt_model_tiling(nnt_ctx *ctx, const nnt_model_config *cfg, int64_t B, int64_t T,
                             const nnt_tiling *overrides, nnt_tiling *out);
/* A model for batches of B sequences of T <= max_seq tokens (tiling: NULL or with 0 entries
 * = automatic), initialised by nnt_layer_init(seed 0). Its forward takes tokens (B, T)
 * int32 and returns the logits (B, T, V); with targets set it also computes the mean
 * cross-entropy. A GPT-2 configuration gives an NNT_LAYER_GPT layer (as nnt_gpt_create),
 * a Llama one an NNT_LAYER_MODEL layer whose parameters carry Hugging Face's names
 * ("model.layers.0.self_attn.q_proj.weight", "lm_head.weight" when untied). */
NNT_API int nnt_model_create(nnt_ctx *ctx, const nnt_model_config *cfg, int64_t B, int64_t T,
                             const nnt_tiling *tiling, nnt_layer **out);
/* nnt_model_create without the initialisation: every parameter is left unwritten (no memory
 * yet), and whatever reads one first (a forward, a save, nnt_tensor_copy_to_host) fails with
 * NNT_E_STATE until it is written. For a base that will be frozen or given adapters, then
 * read (nnt_model_read_hf) or initialised (nnt_layer_init): under NNT_PRECISION_BF16 its
 * frozen matrices are then never held in fp32 as a whole. The memory budget counts each
 * parameter when it is first written or converted (a frozen bf16 matrix at 2 bytes an
 * element), so NNT_E_NOMEM comes from that write. New in 0.3. */
NNT_API int nnt_model_create_empty(nnt_ctx *ctx, const nnt_model_config *cfg, int64_t B,
                                   int64_t T, const nnt_tiling *tiling, nnt_layer **out);
/* The configuration of a layer made by nnt_model_create, nnt_model_load_hf or nnt_gpt_*. */
NNT_API int nnt_model_config_of(const nnt_layer *model, nnt_model_config *cfg);
/* The targets (B, T) of a classifier (nnt_model_config.num_labels > 0) for rows ids (B, T):
 * each row's label (labels[b], in [0, num_labels); labels NULL: 0, as reward models take
 * them) at its pooled position, the ignore index -1 elsewhere. The pooled position is
 * transformers' *ForSequenceClassification's: the last position whose id is not pad_id
 * (position 0 when every id is pad_id); pad_id < 0: the last position T - 1. New in 0.3. */
NNT_API int nnt_model_pool_targets(const int32_t *ids, int64_t B, int64_t T, int64_t pad_id,
                                   const int32_t *labels, int32_t *targets);
/* The logits of a classifier's last forward with targets at each row's pooled position:
 * n = B * num_labels floats, row by row (transformers' pooled logits; a reward model's
 * scores). Between that forward and the next backward (the backward overwrites the
 * logits): else NNT_E_STATE. New in 0.3. */
NNT_API int nnt_model_pooled_logits(nnt_layer *model, float *logits, int64_t n);
/* A classifier's label names (transformers' id2label): names[k] label k's, n = num_labels
 * of them (copied; names NULL and n 0: the defaults "LABEL_0", ...). A name is 1 to 255
 * bytes without control characters, each once. nnt_model_save_hf writes them (id2label,
 * label2id), nnt_model_load_hf and nnt_model_read_hf of a classifier's directory read them,
 * training-state files keep them. New in 0.3. */
NNT_API int nnt_model_set_label_names(nnt_layer *model, const char *const *names, int64_t n);
/* The name of a classifier's label k into buf (size bytes with its NUL): its name, else
 * "LABEL_k"; NNT_E_INVAL when it does not fit. New in 0.3. */
NNT_API int nnt_model_label_name(const nnt_layer *model, int64_t k, char *buf, size_t size);
/* The name of label k of the classifier a model source holds (a source as
 * nnt_model_source_config takes it: a Hugging Face directory's config.json id2label, a
 * training checkpoint's recorded names) into buf (size bytes with its NUL), without building
 * the model: what nnt_model_label_name gives once it is loaded ("LABEL_k" when the source
 * names none). A language model's source (num_labels 0) or k outside [0, num_labels):
 * NNT_E_INVAL; ctx may be NULL. New in 0.4. */
NNT_API int nnt_model_source_label_name(nnt_ctx *ctx, const char *source, int64_t k,
                                        char *buf, size_t size);
/* Read a Hugging Face model directory's config.json (GPT2LMHeadModel, LlamaForCausalLM,
 * MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, SmolLM3ForCausalLM,
 * Gemma3ForCausalLM, Gemma2ForCausalLM,
 * the text of Gemma3ForConditionalGeneration, the MoE classes of nnt_model_hf_config(3),
 * Olmo2ForCausalLM, Olmo3ForCausalLM, Phi3ForCausalLM, PhiForCausalLM, GraniteForCausalLM,
 * StableLmForCausalLM and GPTNeoXForCausalLM; architectures[0], else model_type); the
 * result passes nnt_model_create's checks. A configuration nnt cannot train (another
 * architecture, a rope type other than "default", "llama3", "linear", "yarn" and
 * "longrope", a layer_types list of no form nnt_model_config can say, an odd head_dim,
 * another hidden_act than the family's, ...) is NNT_E_UNSUPPORTED with a
 * message naming the key and value; malformed JSON, a missing or wrong-typed key
 * NNT_E_FORMAT; no file NNT_E_IO. ctx may be NULL (before a context exists; the message is
 * then in nnt_ctx_last_error(NULL)). See nnt_model_hf_config(3) for the keys read. */
NNT_API int nnt_model_hf_config(nnt_ctx *ctx, const char *dir, nnt_model_config *cfg);
/* The end-of-sequence ids a Hugging Face model directory gives generation, as transformers'
 * generate takes them: generation_config.json's eos_token_id (an id or a list), else
 * config.json's (or its text_config's); *n gets their number (0: none named) and the first
 * cap of them go into ids (new in 0.3). Neither file: NNT_E_IO; a value other than an id
 * or a list of ids: NNT_E_FORMAT naming the key. For nnt_sampling.eos_ids. */
NNT_API int nnt_model_hf_eos_ids(const char *dir, int32_t *ids, int64_t cap, int64_t *n);
/* Create a model from a Hugging Face directory: config.json and model.safetensors, or the
 * shards of model.safetensors.index.json when there is no model.safetensors (fp32, bf16 or
 * fp16 tensors, converted to fp32; HF's 2-D shapes). Every tensor is checked (present,
 * dtype, shape; no unknown tensor; sharded: the index, every shard, each tensor in exactly
 * the shard the index names) before any parameter is written; tensors are then read one at
 * a time. On any failure nothing is created and *out is NULL. */
NNT_API int nnt_model_load_hf(nnt_ctx *ctx, const char *dir, int64_t B, int64_t T,
                              const nnt_tiling *tiling, nnt_layer **out);
/* Read the weights of a Hugging Face directory into model (of nnt_model_create or of
 * nnt_model_load_hf), as nnt_model_load_hf reads them: its config.json must describe the
 * model (the sizes: NNT_E_SHAPE; the norms' eps, the rope (theta, scaling, its factors,
 * partial rotary factor), windows, soft-caps, Granite's multipliers, GPT-NeoX's
 * serial_blocks and the MLP's GELU: NNT_E_INVAL, naming the first difference) and every
 * tensor is checked
 * before any parameter is written. LoRA adapters are not read (nnt_model_load_peft). A
 * parameter frozen in bf16
 * (nnt_layer_freeze under NNT_PRECISION_BF16) receives its values rounded to bf16, so that
 * freezing or adding LoRA before reading a model of nnt_model_create_empty keeps a frozen
 * base's matrices in bf16 all along: no fp32 copy of them is ever made (nnt_model_create has
 * written them in fp32 once, at seed 0). New in 0.3. */
NNT_API int nnt_model_read_hf(nnt_layer *model, const char *dir);
/* Write dir/model.safetensors (fp32, HF names and shapes, no lm_head.weight when tied)
 * and dir/config.json that transformers loads (from_pretrained): GPT2LMHeadModel,
 * LlamaForCausalLM, Qwen2ForCausalLM for q/k/v biases without an o_proj bias,
 * Qwen3ForCausalLM with qk_norm, or SmolLM3ForCausalLM with nope_layers; the other
 * families' architectures as nnt_model_save_hf(3) says (Gemma, MoE, OLMo,
 * Phi3ForCausalLM, PhiForCausalLM, GraniteForCausalLM, StableLmForCausalLM,
 * GPTNeoXForCausalLM). dir is created if missing (one level); each file through a temporary
 * file, fsync and rename. */
NNT_API int nnt_model_save_hf(nnt_layer *model, const char *dir);
/* The model configuration a training-state file records: nnt_train_state_save(3) records it
 * when the optimizer's parameters are exactly one model's (nnt_optim_add_layer with a model
 * of nnt_model_create, nnt_model_load_hf, nnt_gpt_* or this function, and nothing else
 * added). A file without one (other parameters, or nnt 0.2) is NNT_E_FORMAT saying so;
 * a damaged one NNT_E_FORMAT naming the file and key; no file NNT_E_IO. ctx may be NULL. */
NNT_API int nnt_model_train_state_config(nnt_ctx *ctx, const char *path, nnt_model_config *cfg);
/* A model for batches of (B, T) (tiling as nnt_model_create) from a training-state file: the
 * configuration it records and its parameters (the optimizer's moments are checked, not
 * read). The whole file is checked first (structure, shapes, both checksums); on any failure
 * nothing is created and *out is NULL. st (may be NULL) gets the caller's section as
 * nnt_train_state_load gives it (release with nnt_train_state_clear). */
NNT_API int nnt_model_load_train_state(nnt_ctx *ctx, const char *path, int64_t B, int64_t T,
                                       const nnt_tiling *tiling, nnt_train_state *st,
                                       nnt_layer **out);

/* The configuration of the model a user names, as nnt-train and nnt-generate take it:
 * source is a preset's name (nnt_model_preset), a Hugging Face directory (its config.json:
 * nnt_model_hf_config), an llm.c checkpoint (its header), or a training checkpoint
 * (nnt_model_train_state_config; a directory holding checkpoint.safetensors, as nnt-train
 * writes its --out, stands for it). A safetensors file of weights alone is NNT_E_INVAL (it
 * has no configuration); a name that is neither a file, a directory nor a preset NNT_E_IO.
 * ctx may be NULL. */
NNT_API int nnt_model_source_config(nnt_ctx *ctx, const char *source, nnt_model_config *cfg);
/* The model source names (as nnt_model_source_config) for batches of (B, T) (tiling: NULL or
 * with 0 entries = automatic): a preset, or source NULL, is created in configuration cfg
 * (NULL: the preset's) and initialised by nnt_layer_init(seed); a directory or checkpoint is
 * loaded (nnt_model_load_hf, nnt_gpt_load_llmc, nnt_model_load_train_state: its own
 * configuration, cfg and seed unused); GPT-2 weights in a safetensors file are loaded in
 * configuration cfg (nnt_gpt_load_safetensors). On failure *out is NULL. */
NNT_API int nnt_model_open(nnt_ctx *ctx, const char *source, const nnt_model_config *cfg,
                           int64_t B, int64_t T, const nnt_tiling *tiling, uint64_t seed,
                           nnt_layer **out);

/* How nnt_model_save_hf_ex writes the weights. */
typedef struct nnt_hf_save_options {
    size_t size;                  /* sizeof(nnt_hf_save_options), set by the init macro      */
    uint64_t max_shard_bytes;     /* most tensor bytes a file holds; 0: one model.safetensors */
    const char *tokenizer_json;   /* a tokenizer.json (or its directory) copied into the
                                     directory, so that it is complete, with the files beside
                                     it (tokenizer_config.json, ...: see below); NULL: none */
} nnt_hf_save_options;
#define NNT_HF_SAVE_OPTIONS_INIT { sizeof(nnt_hf_save_options), 0, NULL }

/* nnt_model_save_hf with options (NULL: NNT_HF_SAVE_OPTIONS_INIT). When the weights exceed
 * max_shard_bytes they are split as transformers' save_pretrained(max_shard_size) splits
 * them: model-00001-of-0000N.safetensors, ... (in order, each up to max_shard_bytes of
 * tensor data; a larger tensor alone in its shard) and model.safetensors.index.json
 * (metadata.total_size, weight_map), written last; one tensor in host memory at a time.
 * A directory holds one checkpoint: a sharded save removes the old index before its first
 * shard and, after its index, model.safetensors and the shards of other counts; a
 * one-file save removes an index and every shard after writing model.safetensors.
 * tokenizer_json is copied to dir/tokenizer.json (a temporary file, fsync, rename; nothing
 * when it is that file) after the weights; when it is a directory or a file named
 * tokenizer.json, the files transformers reads beside it are too: tokenizer_config.json,
 * chat_template.jinja, special_tokens_map.json and generation_config.json, those it has
 * (those it has not are removed from dir: they would be another tokenizer's). config.json
 * comes last. */
/* A size as transformers' save_pretrained(max_shard_size) takes it ("2GB", "500MB", "1GiB":
 * a positive integer, then nothing (bytes) or B, KB, MB, GB, TB (powers of 1000) or KiB, MiB,
 * GiB, TiB (powers of 1024), any case) into *bytes; NNT_E_INVAL naming the text otherwise. */
NNT_API int nnt_hf_size_parse(const char *text, uint64_t *bytes);
NNT_API int nnt_model_save_hf_ex(nnt_layer *model, const char *dir,
                                 const nnt_hf_save_options *opts);


/* ---- LoRA adapters and the PEFT format (new in 0.3) -------------------------------------- */
/* Low-rank adapters on a model's linear maps, as Hugging Face PEFT's LoRA: a module with base
 * weight W (out, in) computes y = x W^T + s (x A^T) B^T with A (r, in), B (out, r) and
 * s = alpha / r (rslora: alpha / sqrt(r)); A starts uniform in +-1/sqrt(in) (PEFT's
 * kaiming_uniform_ with a = sqrt(5)), B at zero. Modules are named as in Hugging Face's
 * models: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (Llama, Gemma, OLMo,
 * Granite and StableLM families), qkv_proj, o_proj, gate_up_proj, down_proj (Phi-3 family),
 * q_proj, k_proj, v_proj, dense, fc1, fc2 (Phi family), query_key_value (q, k and v),
 * dense, dense_h_to_4h, dense_4h_to_h, embed_out (GPT-NeoX family), q_proj, k_proj,
 * v_proj, o_proj, c_fc, c_proj (StarCoder2 family), c_attn, c_proj
 * (attention and MLP), c_fc (GPT-2), lm_head (an untied head); a target matches a module
 * whose name is it or ends with "." and it ("self_attn.q_proj" too), as PEFT's
 * target_modules list. The adapter matrices are parameters of the model named
 * "<module>.lora_A.weight", "<module>.lora_B.weight" (GPT-2's c_attn: "lora_B.q.weight",
 * ".k.", ".v." parts, its B's three thirds; GPT-NeoX's query_key_value likewise, under the
 * model's "self_attn.qkv_proj", its B's rows head by head in PEFT's files), trained like any
 * other; files of the model (nnt_model_save_hf) do not hold them, PEFT's
 * (nnt_model_save_peft) do. */
typedef struct nnt_lora_options {
    size_t size;                  /* sizeof(nnt_lora_options), set by the init macro         */
    int64_t rank;                 /* r, 1 .. 65536                                           */
    double alpha;                 /* lora_alpha, > 0                                         */
    int rslora;                   /* 1: s = alpha / sqrt(r) (use_rslora)                      */
    double dropout;               /* lora_dropout on each adapter's input, in [0, 1): a mask
                                     of the seed, the module and the backwards done
                                     (nnt_tensor_dropout), the same in a recompute; off in
                                     the trainer's validation and in generation              */
    const char *targets;          /* comma-separated module names, or "all-linear" (every
                                     linear map but lm_head); MoE experts by their stacked
                                     tensors' names, "mlp.experts.gate_up_proj" and
                                     "mlp.experts.down_proj" (PEFT's target_parameters);
                                     NULL: PEFT's default of the
                                     family (q_proj,v_proj; GPT-2: c_attn; Phi-3: qkv_proj;
                                     Phi: q_proj,v_proj,fc1,fc2). Read by
                                     nnt_model_lora_add; nnt_model_lora_get gives the
                                     model's (valid while the model lives)                   */
    uint64_t seed;                /* A's initialisation and the dropout masks                 */
    int freeze_base;              /* 1: every other parameter frozen (nnt_layer_freeze), as
                                     PEFT's get_peft_model; 2: frozen keeping fp32 values
                                     (NNT_FREEZE_KEEP_FP32); 3: the matrices kept in NF4
                                     (NNT_FREEZE_NF4, QLoRA; new in 0.4); 0: left as they
                                     are                                                     */
    int dora;                     /* 1: DoRA (PEFT's use_dora; new in 0.4): each output
                                     feature of an adapted module rescaled to a trained
                                     magnitude m, y = m (x (W + s B A)^T) / ||W + s B A||
                                     row by row (+ bias), the norm a constant of the backward;
                                     m starts at the rows' norms of W (the module computes
                                     what it did). Parameters "<module>.lora_magnitude_vector"
                                     (out) (GPT-2's c_attn: ".q", ".k", ".v" parts); on an
                                     NF4 base too (QDoRA). Not on MoE experts' stacks        */
} nnt_lora_options;

#define NNT_LORA_OPTIONS_INIT { sizeof(nnt_lora_options), 8, 8.0, 0, 0.0, NULL, 0, 1, 0 }

/* Add adapters to the target modules of a model (of nnt_model_create, nnt_model_load_hf,
 * nnt_gpt_*); opts NULL: the INIT values. A target that matches no module is NNT_E_INVAL
 * naming it and the model's module names, before anything changes; a model with adapters
 * already NNT_E_STATE. The adapters work with every tiling, precision and recompute; the
 * products are tasks like the base's (two small ones per module and pass, r in one tile).
 * Add parameters to an optimizer after this call. A backward pending from an earlier forward
 * is cancelled (NNT_E_STATE), here and in _merge and _load_peft. On a classifier (num_labels
 * >= 1; new in 0.3) the head "score" is trained whole beside the adapters, as PEFT's
 * task_type SEQ_CLS trains it (modules_to_save): never a target, unfrozen, and saved and read
 * with the adapters by nnt_model_save_peft and nnt_model_load_peft. */
NNT_API int nnt_model_lora_add(nnt_layer *model, const nnt_lora_options *opts);
/* The settings of the model's adapters (NNT_E_STATE without): rank, alpha, rslora,
 * dropout, targets (the model's string); the other fields are left as they are. */
NNT_API int nnt_model_lora_get(const nnt_layer *model, nnt_lora_options *opts);
/* Merge the adapters into the base weights, W += s B A in float (PEFT's merge_and_unload),
 * and remove them: the model computes what it computed, without them, and
 * nnt_model_save_hf then writes the merged weights. Frozen parameters stay frozen. */
NNT_API int nnt_model_lora_merge(nnt_layer *model);
/* Write dir/adapter_config.json and dir/adapter_model.safetensors as PEFT 0.21 does
 * (save_pretrained): fp32 tensors "base_model.model.<HF module>.lora_A.weight" (r, in) and
 * ".lora_B.weight" (out, r); dir created if missing (one level); each file through a
 * temporary file and a rename. PeftModel.from_pretrained loads it on the same base. A
 * classifier's adapters (nnt_model_lora_add) are saved with its head, "base_model.model.
 * score.weight", task_type "SEQ_CLS" and modules_to_save ["classifier", "score"]. */
NNT_API int nnt_model_save_peft(nnt_layer *model, const char *dir);
/* Load an adapter PEFT saved (or nnt_model_save_peft) into a model without adapters: its
 * settings from adapter_config.json (r, lora_alpha, use_rslora, target_modules as a list or
 * "all-linear"), its tensors from adapter_model.safetensors (fp32, bf16 or fp16), the base
 * then frozen. Refused, with nothing changed: a tensor whose shape differs from the model's
 * (NNT_E_SHAPE naming it: another base model), a missing tensor or one of no target
 * (NNT_E_FORMAT naming it), a target matching no module (NNT_E_INVAL), an option nnt does not
 * implement set to other than its default (use_dora, layers_to_transform, a
 * regular-expression target_modules, bias other than "none", modules_to_save naming other
 * than a classifier's head, ...: NNT_E_UNSUPPORTED naming the key). modules_to_save "score"
 * (PEFT's task_type SEQ_CLS) also reads a classifier's head, left trainable (on a language
 * model: NNT_E_INVAL). lora_dropout applies as nnt_lora_options.dropout, seed 0. */
NNT_API int nnt_model_load_peft(nnt_layer *model, const char *dir);


/* ---- generation ------------------------------------------------------------------------- */
typedef struct nnt_sampling {
    size_t size;                 /* sizeof(nnt_sampling), set by the init macro              */
    double temperature;          /* 0: greedy; > 0: sample from softmax(logits / temp)       */
    int64_t top_k;               /* > 0: only the top_k largest logits; 0: all               */
    uint64_t seed;               /* seed of the sampling PRNG                                */
    /* new in 0.3 (a size without them, as 0.2 set, gets their defaults) */
    double top_p;                /* in (0, 1): only the most likely tokens whose probabilities
                                    (after temperature and top_k) sum to >= top_p; 1: all     */
    int32_t eos;                 /* >= 0: stop after this token, out's rest set to it; -1 none */
    int no_cache;                /* 1: no key/value cache: every token a forward over the
                                    whole window (the 0.2 behaviour, slower; for comparison)  */
    void (*on_token)(void *arg, int64_t i, int32_t token);
                                 /* NULL, or called with on_token_arg as each new token i is
                                    chosen, in order, before the next forward: to show the
                                    text as it is produced (an eos token too, then no more)   */
    void *on_token_arg;
    /* also new in 0.3, later (a size without them gets none) */
    const int32_t *eos_ids;      /* NULL, or n_eos_ids more ids that stop as eos does: a model's
                                    eos_token_id list (nnt_model_hf_eos_ids)                 */
    int64_t n_eos_ids;
    /* new in 0.4 (a size without them gets none) */
    double repetition_penalty;   /* > 0; 1: none. The logits of the tokens of the sequence so
                                    far (prompt and generated) divided by it where positive,
                                    multiplied where negative, before everything else (greedy
                                    too): transformers' repetition_penalty                   */
    double min_p;                /* in [0, 1]; 0: none. After temperature, top_k and top_p,
                                    only the tokens whose probability is at least min_p times
                                    the most likely token's: transformers' min_p             */
    /* also new in 0.4, later (a size without them gets none) */
    double typical_p;            /* in (0, 1]; 1: none. After min_p, only the tokens whose
                                    -log p is nearest the entropy, as many as hold typical_p
                                    of the probability (p and the entropy over the tokens left):
                                    transformers' typical_p (locally typical sampling)        */
    double epsilon_cutoff;       /* in [0, 1); 0: none. Then only the tokens of probability at
                                    least epsilon_cutoff (and the most likely one):
                                    transformers' epsilon_cutoff                             */
    double eta_cutoff;           /* in [0, 1); 0: none. Then only the tokens of probability at
                                    least min(eta, sqrt(eta) exp(-entropy)) (and the most likely
                                    one): transformers' eta_cutoff                           */
    int64_t no_repeat_ngram_size;   /* >= 0; 0: none. n > 0: a token that would end an n-gram
                                    already in the sequence (prompt and generated) is never
                                    chosen (greedy too; with the repetition penalty, before
                                    the rest): transformers' no_repeat_ngram_size            */
} nnt_sampling;

#define NNT_SAMPLING_INIT                                                                      \
    { sizeof(nnt_sampling), 1.0, 40, 0, 1.0, -1, 0, NULL, NULL, NULL, 0, 1.0, 0.0, 1.0, 0.0, 0.0, \
      0 }

/* The sampling a Hugging Face model directory recommends (new in 0.4), as vLLM takes it:
 * generation_config.json's temperature, top_k, top_p, repetition_penalty, min_p, typical_p,
 * epsilon_cutoff, eta_cutoff and no_repeat_ngram_size written into *s where the file names
 * them (the other fields, and those it does not name, left as they are; a field only when
 * s->size holds it); *found the NNT_HF_SAMPLING_* bits of the ones it wrote (0 without the
 * file, which is no error; a null value is no value). do_sample is not read; settings nnt does not apply
 * (encoder_repetition_penalty, length_penalty, top_h) at values that would change the
 * sampling are named in a warning (nnt_log). Malformed JSON or a value out of range:
 * NNT_E_FORMAT naming the file and key. */
#define NNT_HF_SAMPLING_TEMPERATURE 1u
#define NNT_HF_SAMPLING_TOP_K 2u
#define NNT_HF_SAMPLING_TOP_P 4u
#define NNT_HF_SAMPLING_REPETITION_PENALTY 8u
#define NNT_HF_SAMPLING_MIN_P 16u
#define NNT_HF_SAMPLING_TYPICAL_P 32u
#define NNT_HF_SAMPLING_EPSILON_CUTOFF 64u
#define NNT_HF_SAMPLING_ETA_CUTOFF 128u
#define NNT_HF_SAMPLING_NO_REPEAT_NGRAM_SIZE 256u
NNT_API int nnt_model_hf_sampling(const char *dir, nnt_sampling *s, unsigned *found);

/* Append ngen tokens to the prompt (nprompt >= 1 ids in [0, V)) and write them to
 * out[0..ngen); s NULL: greedy. A GPT layer generates as nnt_gpt_generate. With a key/value
 * cache: the prompt in one forward, then one forward per new token at its position, while
 * the sequence fits max_seq (T for a GPT layer); past it the window slides (positions
 * restart at 0): each token is a forward over the last max_seq tokens. Overwrites the
 * activations (a pending backward is cancelled); parameters, gradients and the targets set
 * are untouched. */
NNT_API int nnt_model_generate(nnt_layer *model, const int32_t *prompt, int64_t nprompt,
                               int64_t ngen, const nnt_sampling *s, int32_t *out);
/* nseq continuations of one prompt generated side by side, out (nseq, ngen): sequence r's
 * tokens at out[r * ngen ..], those nnt_model_generate gives with s's seed + r (up to the
 * rounding of products over nseq rows instead of one: a greedy choice between two logits
 * within about 1e-6 may differ). The prompt's forward runs once, its keys and values are
 * copied to every sequence, then each step is one forward of nseq tokens (the weights read
 * once for all of them). A sequence that ends (eos) has the rest of its row set to its eos
 * and is computed no further; on_token, if set, gets i = r * ngen + j (the index in out) for
 * token j of sequence r, the sequences of a step in order. nseq 1 is nnt_model_generate. */
NNT_API int nnt_model_generate_n(nnt_layer *model, const int32_t *prompt, int64_t nprompt,
                                 int64_t nseq, int64_t ngen, const nnt_sampling *s,
                                 int32_t *out);
/* nseq prompts of their own continued side by side (new in 0.4), out (nseq, ngen): sequence
 * r's tokens at out[r * ngen ..], those nnt_model_generate gives for prompts[r] (nprompts[r]
 * >= 1 ids) with s's seed replaced by seeds[r] (seeds NULL: s's seed + r), up to the rounding
 * of products over nseq rows (as nnt_model_generate_n). Each prompt is padded on the left to
 * the longest, its pads unseen by its tokens (which take positions from 0, as alone: the
 * rotations, position embeddings and masks go by each row's positions); the prompts' forward
 * is one forward of nseq rows, then each step one forward of nseq tokens (the weights read
 * once for all). eos and on_token as nnt_model_generate_n. When they cannot go side by side
 * (the longest prompt and ngen - 1 new tokens past the model's context max_seq, no_cache, or
 * a LongRoPE model crossing original_max_position) the prompts are continued one after
 * another, with the same results. nseq 1 is nnt_model_generate. */
NNT_API int nnt_model_generate_batch(nnt_layer *model, int64_t nseq,
                                     const int32_t *const *prompts, const int64_t *nprompts,
                                     const uint64_t *seeds, int64_t ngen,
                                     const nnt_sampling *s, int32_t *out);
/* Text in, text out: prompt (UTF-8, encoded by tok; at least one token) continued by ngen
 * tokens as nnt_model_generate continues it, and the whole sequence decoded into *text
 * (malloc'd, NUL-terminated: free() it; *len, when len is not NULL, its length, which counts
 * any NUL byte decoded), the ids tok does not have (a model vocabulary larger than the
 * tokenizer's) written as "<id>". *text NULL on failure. */
NNT_API int nnt_model_generate_text(nnt_layer *model, const nnt_tokenizer *tok,
                                    const char *prompt, int64_t ngen, const nnt_sampling *s,
                                    char **text, size_t *len);


/* ---- data and tokenizers ---------------------------------------------------------------- */
/* Byte-level tokenizer: token = byte value, vocab 256. */
NNT_API int nnt_tokenizer_bytes_create(nnt_tokenizer **out);
/* GPT-2 BPE tokenizer from a local vocab.json and merges.txt (vocab 50257). */
NNT_API int nnt_tokenizer_bpe_load(const char *vocab_json, const char *merges_txt,
                                   nnt_tokenizer **out);
NNT_API void nnt_tokenizer_destroy(nnt_tokenizer *tok);
NNT_API int nnt_tokenizer_vocab_size(const nnt_tokenizer *tok, int64_t *vocab);
/* Encode len bytes of UTF-8 text; *n gets the number of tokens; ids may be NULL (count
 * only), otherwise it holds cap entries (NNT_E_INVAL with *n set when too small). */
NNT_API int nnt_tokenizer_encode(const nnt_tokenizer *tok, const char *text, size_t len,
                                 int32_t *ids, size_t cap, size_t *n);
/* Decode n ids into text (cap bytes, NUL-terminated; *len gets the length without the NUL,
 * or the size needed when cap is too small: NNT_E_INVAL). */
NNT_API int nnt_tokenizer_decode(const nnt_tokenizer *tok, const int32_t *ids, size_t n,
                                 char *text, size_t cap, size_t *len);

typedef enum nnt_data_format {
    NNT_DATA_AUTO = 0,            /* llm.c magic: LLMC; name ending ".bin": NANOGPT; else TEXT */
    NNT_DATA_TEXT = 1,            /* UTF-8 text through a tokenizer; a directory: its regular
                                     files in name order, concatenated                       */
    NNT_DATA_LLMC = 2,            /* llm.c token shard: magic 20240520 version 1, uint16
                                     tokens, or magic 20240801 version 7, uint32 tokens (for
                                     vocabularies above 65535; nnt-tokenize(1) writes both)    */
    NNT_DATA_NANOGPT = 3          /* nanoGPT train.bin / val.bin (uint16 stream)               */
} nnt_data_format;

/* Open a token source. tok is used for TEXT (NULL: bytes) and may be destroyed afterwards.
 * vocab > 0: ids >= vocab are rejected with NNT_E_FORMAT naming the position. */
NNT_API int nnt_data_open(const char *path, nnt_data_format format, const nnt_tokenizer *tok,
                          int64_t vocab, nnt_data **out);
NNT_API void nnt_data_close(nnt_data *data);
NNT_API int nnt_data_num_tokens(const nnt_data *data, int64_t *n);
/* The format the source was read as: TEXT, LLMC or NANOGPT (NNT_DATA_AUTO resolved). */
NNT_API int nnt_data_format_of(const nnt_data *data, nnt_data_format *format);
/* n tokens starting at pos (taken modulo the number of tokens), wrapping to the start. */
NNT_API int nnt_data_read(nnt_data *data, int64_t pos, int32_t *ids, int64_t n);
/* Whether tokens pos .. pos + n - 1 (wrapping as nnt_data_read) count as targets in the loss:
 * counts[i] 1 or 0, from the loss mask of nnt-tokenize's prompt/answer files (1 for every
 * token of a source without one). A token that does not count is a target the trainer sets to
 * the cross-entropy's ignore index (-1), as transformers' label -100. */
NNT_API int nnt_data_read_mask(nnt_data *data, int64_t pos, uint8_t *counts, int64_t n);
/* Where examples start in tokens pos .. pos + n - 1 (wrapping as nnt_data_read): starts[i] 1
 * when the token is an example's first token, from the example starts of nnt-tokenize's packed
 * files (nnt-tokenize --pack; every row's first token is one), else 0 (all 0 for a source
 * without them). The position of a token in its example (nnt_layer_set_positions) is 0 at a
 * start, else one more than the token before it's; the trainer does this by itself. */
NNT_API int nnt_data_read_starts(nnt_data *data, int64_t pos, uint8_t *starts, int64_t n);
/* The values of rows row, row + 1, ... (taken modulo the number of rows, wrapping to the
 * first) of a source whose rows carry them (nnt_data_info.row_values = k): n = k times the
 * rows read, row by row. A row is block tokens (nnt_data_info.block): row r holds tokens
 * r * block .. r * block + block - 1. NNT_E_INVAL for a source without them, NNT_E_FORMAT
 * for a value that is not finite. New in 0.4. */
NNT_API int nnt_data_read_row_values(nnt_data *data, int64_t row, float *values, int64_t n);

/* What a source holds (nnt_data_info_get). */
typedef struct nnt_data_info {
    size_t size;                  /* sizeof(nnt_data_info): set it before the call            */
    nnt_data_format format;       /* TEXT, LLMC or NANOGPT                                    */
    int64_t tokens;               /* all tokens                                               */
    int masked;                   /* 1: a file has a loss mask (not every token counts)       */
    int64_t counted;              /* tokens that count as targets (tokens when not masked)    */
    int64_t block;                /* > 0: the files are rows of block tokens, one or more whole
                                     examples each (nnt-tokenize --seq): train with T = block;
                                     0: a stream                                              */
    /* appended in 0.3 (a size without it: not written) */
    int starts;                   /* 1: a file records where its examples start (packed rows,
                                     nnt-tokenize --pack): nnt_data_read_starts               */
    /* appended in 0.4 (a size without it: not written) */
    int64_t row_values;           /* > 0: each row carries this many values, a classifier's
                                     regression or multi-label targets
                                     (nnt_token_writer_write_example_values,
                                     nnt_data_read_row_values); 0: none                       */
} nnt_data_info;

#define NNT_DATA_INFO_INIT { sizeof(nnt_data_info), NNT_DATA_AUTO, 0, 0, 0, 0, 0, 0 }

NNT_API int nnt_data_info_get(const nnt_data *data, nnt_data_info *info);

/* A streaming writer of llm.c token files (what nnt_data_open reads as NNT_DATA_LLMC, and
 * nnt-tokenize(1) writes): ids are written as they come; close puts the count in the header
 * and the file in place atomically (a temporary file beside it, fsync, rename), so the path
 * holds either its old contents or the complete new file. */
typedef struct nnt_token_writer nnt_token_writer;

typedef struct nnt_token_writer_options {
    size_t size;                  /* sizeof(nnt_token_writer_options), set by the init macro */
    int bits;                     /* 16: magic 20240520 version 1, uint16 ids (0..65535);
                                     32: llm.c's Llama 3 header, magic 20240801 version 7,
                                     uint32 ids (0..2^31 - 1); 0: 16, or 32 when vocab is
                                     above 65536                                            */
    int64_t vocab;                /* > 0: ids must be below it (and it must fit bits); 0: only
                                     the format's range is checked                          */
    /* prompt/answer data: nnt's extension of the header (nnt-tokenize(1), TOKEN FILES)    */
    int mask;                     /* 1: the file records which tokens count as targets in the
                                     loss (nnt_token_writer_write_masked, _write_example)    */
    int64_t block;                /* > 0: rows of block tokens (nnt-train's T) that
                                     nnt_token_writer_write_example lays examples in; the file
                                     is whole rows at close; 0: none                        */
    int pack;                     /* write_example: 0 one example a row, the rest padded; 1
                                     whole examples one after another while they fit        */
    int cut;                      /* write_example, an example longer than block: 0 refused
                                     (NNT_E_INVAL), 1 its first block tokens kept            */
    int32_t pad;                  /* the id that fills rows (never a target)                 */
    /* new in 0.4 (a size without it: 0) */
    int64_t row_values;           /* > 0: every row carries this many float values, the
                                     targets of a classifier trained on values (regression,
                                     multi-label: nnt_layer_label_values_create), given with
                                     each example (nnt_token_writer_write_example_values);
                                     needs mask and block, not pack. 0: none                 */
} nnt_token_writer_options;

#define NNT_TOKEN_WRITER_OPTIONS_INIT { sizeof(nnt_token_writer_options), 0, 0, 0, 0, 0, 0, 0, 0 }

/* Create path's temporary file and write a header with count 0 (opts NULL: the defaults).
 * ctx may be NULL; when given (and still live) failures are recorded there. */
NNT_API int nnt_token_writer_open(nnt_ctx *ctx, const char *path,
                                  const nnt_token_writer_options *opts,
                                  nnt_token_writer **out);
/* Append n ids. An id outside the format's range or the vocabulary, or more than 2^31 - 1
 * tokens in all, is NNT_E_INVAL naming the id and its position, and nothing of the call is
 * written (the writer stays usable); a write error is NNT_E_IO, after which only close (which
 * then fails) and destroy remain. */
NNT_API int nnt_token_writer_write(nnt_token_writer *w, const int32_t *ids, size_t n);
/* Append n ids of which those with counts[i] != 0 count as targets in the loss (counts
 * NULL: all of them); needs the mask option. A row's first token never counts. */
NNT_API int nnt_token_writer_write_masked(nnt_token_writer *w, const int32_t *ids,
                                          const uint8_t *counts, size_t n);
/* One example (a prompt and its answer) laid whole in rows of block tokens: it starts a new
 * row unless pack is set and it fits in the rest of the current one (which is padded
 * otherwise); longer than block: cut or refused (NNT_E_INVAL) as the options say. Its first
 * token never counts. Needs the mask and block options. */
NNT_API int nnt_token_writer_write_example(nnt_token_writer *w, const int32_t *ids,
                                           const uint8_t *counts, size_t n);
/* write_example for a writer of row values: the example, in a row of its own, and that row's
 * row_values values (finite; NNT_E_INVAL else, nothing written). write_example, write and
 * write_masked are refused by such a writer. New in 0.4. */
NNT_API int nnt_token_writer_write_example_values(nnt_token_writer *w, const int32_t *ids,
                                                  const uint8_t *counts, size_t n,
                                                  const float *values);
/* The number of ids written so far. */
NNT_API int nnt_token_writer_count(const nnt_token_writer *w, int64_t *n);
/* Put the count in the header, fsync and rename the file into place; frees w whatever the
 * outcome. On failure (NNT_E_IO, or an earlier failed write) no file is left behind and an
 * older file at path is untouched. */
NNT_API int nnt_token_writer_close(nnt_token_writer *w);
/* Abandon the file: the temporary file is removed, path is untouched; NULL is accepted. */
NNT_API void nnt_token_writer_destroy(nnt_token_writer *w);

/* Prompt/answer records (JSON Lines, the forms of TRL's SFTTrainer) to token ids and which
 * of them count as targets in the loss (nnt_sft_create(3)); nnt-tokenize(1) writes them to a
 * token file with nnt_token_writer_write_example. */
typedef struct nnt_sft nnt_sft;

typedef enum nnt_chat_template {
    NNT_CHAT_AUTO = 0,            /* the tokenizer_config.json's, when nnt recognises it      */
    NNT_CHAT_NONE = 1,            /* none: "messages" records are refused                     */
    NNT_CHAT_CHATML = 2,          /* <|im_start|>ROLE\n CONTENT<|im_end|>\n (SmolLM2, Qwen)   */
    NNT_CHAT_LLAMA3 = 3,          /* <|begin_of_text|> then <|start_header_id|>ROLE
                                     <|end_header_id|>\n\n CONTENT<|eot_id|> (Llama 3)         */
    /* the templates the model repositories publish, recognised whole (new in 0.3) */
    NNT_CHAT_QWEN2_5 = 4,         /* ChatML with Qwen's default system message (Qwen2.5)     */
    NNT_CHAT_QWEN3 = 5,           /* ChatML, each assistant turn <think>\n REASONING
                                     \n</think>\n\n ANSWER as TRL trains Qwen3               */
    NNT_CHAT_LLAMA3_1 = 6,        /* Llama 3 after a dated system block (Cutting Knowledge Date
                                     ..., Today Date: 26 Jul 2024)                           */
    NNT_CHAT_LLAMA3_2 = 7,        /* Llama 3.1's, dated today as transformers' strftime_now  */
    NNT_CHAT_GEMMA = 8,           /* <bos> then <start_of_turn>ROLE\n CONTENT<end_of_turn>\n,
                                     the assistant's ROLE "model", no system message (Gemma,
                                     Gemma 2)                                                 */
    NNT_CHAT_GEMMA3 = 9,          /* Gemma's, a first system message's content and \n\n
                                     before the first user message's (Gemma 3)               */
    NNT_CHAT_PHI3 = 10,           /* <|ROLE|>\n CONTENT<|end|>\n, then eos_token (Phi-3)    */
    NNT_CHAT_PHI3_5 = 11,         /* Phi-3's without empty system messages (Phi-3.5)         */
    NNT_CHAT_QWEN3_2507 = 12,     /* ChatML without a default system message, contents as
                                     they are (Qwen3-*-Instruct-2507)                         */
    NNT_CHAT_DEEPSEEK_R1 = 13,    /* bos, the last system message's content, then <|User|>
                                     CONTENT and <|Assistant|>CONTENT<|end of sentence|>
                                     (the bars U+FF5C, the spaces U+2581: DeepSeek-R1-Distill,
                                     Qwen and Llama)                                          */
    NNT_CHAT_GPT_OSS = 14         /* harmony: a dated system block, a first system or
                                     developer message as instructions, <|start|>ROLE
                                     <|message|>CONTENT<|end|>, the assistant's on its final
                                     channel, the last one's thinking on its analysis channel
                                     and <|return|> (gpt-oss)                                 */
} nnt_chat_template;

typedef struct nnt_sft_options {
    size_t size;                  /* sizeof(nnt_sft_options), set by the init macro          */
    const char *tokenizer_config; /* tokenizer_config.json (or its directory): eos_token, and
                                     chat_template with NNT_CHAT_AUTO; NULL: none (no eos is
                                     appended)                                               */
    nnt_chat_template chat_template;
    /* new in 0.3 (a size without it gets NULL) */
    const char *date;             /* Llama 3.1 and 3.2: the system block's "Today Date" as the
                                     templates' date_string ("26 Jul 2024"); gpt-oss: its
                                     "Current date" ("2025-02-03"); NULL: their default (3.1:
                                     26 Jul 2024; 3.2 and gpt-oss: today, local time)        */
    int all_tokens;               /* 1: every token counts, conversations rendered as their
                                     published template renders them (TRL with
                                     completion_only_loss=False and without
                                     assistant_only_loss); 0: the answers only (default)    */
    int no_thinking;              /* 1: Qwen3's prompts end with an empty think block, as its
                                     template's enable_thinking=False renders them (other
                                     templates refuse it); 0: the model thinks first        */
    /* new in 0.4 (a size without it gets 0) */
    int assistant_only;           /* 1: a conversational prompt/completion counts the
                                     assistant turns of its completion only (not its tool
                                     responses), rendered as the training template renders
                                     them (TRL's assistant_only_loss); 0: the whole
                                     completion, as published (TRL's default). Not with
                                     all_tokens                                             */
} nnt_sft_options;

#define NNT_SFT_OPTIONS_INIT { sizeof(nnt_sft_options), NULL, NNT_CHAT_AUTO, NULL, 0, 0, 0 }

/* tok must outlive the encoder. A chat template nnt does not recognise is NNT_E_UNSUPPORTED
 * naming it; the file unreadable NNT_E_IO, malformed NNT_E_FORMAT. */
NNT_API int nnt_sft_create(const nnt_tokenizer *tok, const nnt_sft_options *opts,
                           nnt_sft **out);
NNT_API void nnt_sft_destroy(nnt_sft *s);
/* The template "messages" records are rendered with (NNT_CHAT_NONE: none). */
NNT_API int nnt_sft_template_of(const nnt_sft *s, nnt_chat_template *t);
/* The id to pad rows with: tokenizer_config.json's pad_token, else its eos_token (TRL's
 * choice), when it is one token; else 0. Padding never counts in the loss. */
NNT_API int nnt_sft_pad_id(const nnt_sft *s, int32_t *id);
/* "chatml", "llama3", "qwen2.5", "qwen3", "llama3.1", "llama3.2", "gemma" (or "gemma2"),
 * "gemma3", "phi3", "phi3.5", "qwen3-2507", "deepseek-r1", "gpt-oss" or "none"; another name
 * is NNT_E_UNSUPPORTED naming it. */
NNT_API int nnt_chat_template_from_name(const char *name, nnt_chat_template *out);
/* One record (a JSON object of len bytes): *ids and *counts (1: counts as a target) get n
 * entries, valid until the next call. A malformed record, a kind it cannot be (keys), an
 * empty completion, an unknown role, no assistant message are NNT_E_FORMAT naming it. */
NNT_API int nnt_sft_encode(nnt_sft *s, const char *record, size_t len, const int32_t **ids,
                           const uint8_t **counts, size_t *n);
/* A prompt for generation: a record {"messages": [...]} (or the list of messages alone)
 * whose last message is a user's, rendered with the template and then its generation
 * prompt, as transformers' apply_chat_template(messages, add_generation_prompt=True) renders
 * the published template (Qwen3: earlier assistant turns without their reasoning), into
 * *ids (*n of them, valid until the next call). Refused as nnt_sft_encode refuses, and a
 * last message not a user's, NNT_E_FORMAT (new in 0.3). New in 0.4: TRL's prompt-only
 * records {"prompt": P, ...}, whose other members (a dataset's other columns: a reference
 * completion, an id) are ignored: P a list of messages, rendered as above (with the record's
 * chat_template_kwargs and tools); P a string, the ids a training row of {"prompt": P,
 * "completion": C} begins with (the tokenizer's special tokens before a text, e.g. Llama 3's
 * <|begin_of_text|>, then P's ids; no template). */
NNT_API int nnt_sft_encode_prompt(nnt_sft *s, const char *record, size_t len,
                                  const int32_t **ids, size_t *n);
/* A preference record (TRL's DPO forms; new in 0.3): {"prompt": P, "chosen": C,
 * "rejected": R} with P, C and R strings or lists of messages, or {"chosen": C, "rejected":
 * R} whose shared beginning is the prompt (TRL's extract_prompt: the messages, or for strings
 * the characters, up to where they first differ), with chat_template_kwargs and tools as in
 * nnt_sft_encode. ids[0], counts[0], n[0]: the chosen sequence, encoded as nnt_sft_encode
 * encodes {"prompt": P, "completion": C}; ids[1], counts[1], n[1]: the rejected one; both
 * count from the first position where either prompt's ids and its sequence's ids differ
 * (as TRL's DPOTrainer tokenizes them). Valid until the next call. Refused as nnt_sft_encode
 * refuses, and a record without chosen or rejected, or with other keys, NNT_E_FORMAT. */
NNT_API int nnt_sft_encode_preference(nnt_sft *s, const char *record, size_t len,
                                      const int32_t *ids[2], const uint8_t *counts[2],
                                      size_t n[2]);
/* An unpaired preference record (TRL's KTO form; new in 0.4): {"prompt": P, "completion": C,
 * "label": L}, P and C strings or lists of messages, L true (a desirable completion) or false
 * (an undesirable one), with chat_template_kwargs and tools as in nnt_sft_encode. *ids,
 * *counts, *n: the sequence encoded as nnt_sft_encode encodes {"prompt": P, "completion": C}
 * (as TRL's KTOTrainer tokenizes it: the completion's tokens count), valid until the next
 * call; *desirable 1 for true, 0 for false. Refused as nnt_sft_encode refuses, and a record
 * without prompt, completion or label, a label not a JSON boolean, or another key (chosen,
 * rejected: a paired record) NNT_E_FORMAT naming it. The trainer reads such rows with their
 * label as the row's value (nnt-tokenize --unpaired; nnt_trainer_options.dpo_loss
 * NNT_DPO_KTO). */
NNT_API int nnt_sft_encode_unpaired(nnt_sft *s, const char *record, size_t len,
                                    const int32_t **ids, const uint8_t **counts, size_t *n,
                                    int *desirable);
/* The rows TRL's KTOTrainer reads of a record (new in 0.4), paired or not: an unpaired record
 * (as nnt_sft_encode_unpaired) is one row, *rows 1, in ids[0], counts[0], n[0], its label in
 * desirable[0]; a preference record (as nnt_sft_encode_preference reads it: an explicit or a
 * shared prompt) is two, *rows 2, as TRL's unpair_preference_dataset makes them: {"prompt": P,
 * "completion": C, "label": true} in ids[0] (desirable[0] 1) and {"prompt": P, "completion":
 * R, "label": false} in ids[1] (desirable[1] 0), each encoded as nnt_sft_encode_unpaired
 * encodes it (each counts from its own completion: not DPO's shared start). Valid until the
 * next call. TRL orders a dataset's unpaired rows in chunks of 1000 records: the chunk's
 * chosen rows, then its rejected ones (nnt-tokenize --unpaired does). Refused as those two
 * refuse, NNT_E_FORMAT naming it. */
NNT_API int nnt_sft_encode_unpaired_rows(nnt_sft *s, const char *record, size_t len,
                                         const int32_t *ids[2], const uint8_t *counts[2],
                                         size_t n[2], int desirable[2], int *rows);
/* A classification record (transformers' text classification; new in 0.3): {"text": T,
 * "label": K}, K an integer from 0 (the class's index). *ids get T's ids as tokenizer(text)
 * gives them (with the special tokens the tokenizer's post-processor adds, e.g. Llama 3's
 * <|begin_of_text|>; no eos), *n of them (at least 1), valid until the next call; *label K.
 * A classifier trains on its text followed by its label (the one target that counts:
 * nnt_trainer_create(3), nnt-tokenize --num-labels). A malformed record, other keys, a text
 * not a string or of no token, a label not such an integer are NNT_E_FORMAT naming it. */
NNT_API int nnt_sft_encode_labelled(nnt_sft *s, const char *record, size_t len,
                                    const int32_t **ids, size_t *n, int64_t *label);
/* A record of a classifier trained on values (new in 0.4; nnt_layer_label_values_create):
 * {"text": T, "label": V}, V a list of k numbers (or a number when k is 1): a regression's
 * targets (problem NNT_PROBLEM_REGRESSION), or a multi-label classifier's
 * (NNT_PROBLEM_MULTI_LABEL), each in [0, 1] (1: the text has the label). *ids as
 * nnt_sft_encode_labelled gives them, values the k values. A malformed record, other keys, a
 * text not a string or of no token, a label of another count, not finite, or out of [0, 1]
 * for multi-label are NNT_E_FORMAT naming it. A classifier trains on its text followed by
 * one token that counts (nnt-tokenize --problem-type), the row carrying the values
 * (nnt_token_writer_write_example_values). */
NNT_API int nnt_sft_encode_valued(nnt_sft *s, const char *record, size_t len, int problem,
                                  int64_t k, const int32_t **ids, size_t *n, float *values);
/* Names of the labels (n of them, copied; NULL and 0: none): then nnt_sft_encode_labelled
 * also takes a label given by its name, a JSON string, as label k when it is names[k]
 * (another string NNT_E_FORMAT naming it). Names as nnt_model_set_label_names takes them
 * (NNT_E_INVAL naming the label). New in 0.3. */
NNT_API int nnt_sft_set_label_names(nnt_sft *s, const char *const *names, int64_t n);

/* A tokenizer from a Hugging Face tokenizer.json (the `tokenizers` package's format; a
 * directory: its tokenizer.json), used with
 * nnt_tokenizer_encode/_decode/_vocab_size and nnt_data_open. BPE models with ByteLevel,
 * Split (PCRE2 regex), Digits and Metaspace pre-tokenizers, Prepend/Replace and Unicode
 * (NFC, NFD, NFKC, NFKD) normalizers, byte_fallback, added and special tokens, and the
 * ByteLevel, Replace, ByteFallback, Fuse, Strip and Metaspace decoders (GPT-2, Llama 2/3,
 * Mistral, Qwen2/3, SmolLM2 layouts). Encoding
 * is the package's encode(text, add_special_tokens=False); decoding its decode(ids,
 * skip_special_tokens=False) except that invalid UTF-8 is returned as bytes. Invalid UTF-8
 * input: see nnt_tokenizer_hf_load(3). Malformed JSON or an inconsistent file is
 * NNT_E_FORMAT naming the file (and byte offset or key); a component this reader does not
 * implement NNT_E_UNSUPPORTED naming the key and the value; no file NNT_E_IO. */
NNT_API int nnt_tokenizer_hf_load(const char *tokenizer_json, nnt_tokenizer **out);

/* How a run's text is tokenized (nnt_run_config.tokenizer). */
typedef enum nnt_tokenizer_kind {
    NNT_TOKENIZER_AUTO = -1,      /* the model source's (nnt_tokenizer_of_source), else bytes  */
    NNT_TOKENIZER_BYTES = 0,      /* one token a byte (nnt_tokenizer_bytes_create)             */
    NNT_TOKENIZER_BPE = 1,        /* GPT-2 BPE of a vocab.json and a merges.txt                */
    NNT_TOKENIZER_JSON = 2        /* a Hugging Face tokenizer.json                             */
} nnt_tokenizer_kind;

/* The tokenizer a model source comes with (nnt-train and nnt-generate take it when none is
 * named): a directory's tokenizer.json, else its vocab.json and merges.txt (GPT-2 BPE); a
 * training checkpoint's (or a directory holding checkpoint.safetensors) the one its run
 * recorded (nnt_trainer_open(3): bytes, or the files named, which must still be there:
 * NNT_E_IO naming them). *out NULL (status 0) when the source names none: a directory
 * without those files, an llm.c checkpoint, a preset, NULL. */
NNT_API int nnt_tokenizer_of_source(const char *source, nnt_tokenizer **out);


/* ---- training loop ----------------------------------------------------------------------
 * The loop every training program shares (nnt_trainer_create(3)): steps of accum
 * micro-batches of (B, T) tokens, the optimizer's update and schedule, validation on
 * held-out tokens every val_every steps with a checkpoint of the best, periodic
 * checkpoints (through a temporary file and a rename) recording the run's configuration,
 * resume of all of it, the training tokens read in order or shuffled. */
typedef enum nnt_trainer_event {
    NNT_TRAINER_STEP = 0,         /* a step was done (its figures)                            */
    NNT_TRAINER_VALIDATION = 1,   /* a validation was done (its loss)                         */
    NNT_TRAINER_CHECKPOINT = 2    /* a checkpoint of this step was written (every save_every
                                     steps, or asked for by nnt_trainer_request_save): step  */
} nnt_trainer_event;

/* What the callback receives (valid during the call). */
typedef struct nnt_trainer_report {
    size_t size;                 /* sizeof(nnt_trainer_report) of the library                */
    nnt_trainer_event event;
    int64_t step;                /* the step just done (resumed steps counted), or the step
                                    after which the validation ran                           */
    int64_t steps;               /* the run's steps (nnt_trainer_options.steps)              */
    double loss;                 /* mean loss of the step's micro-batches / of the windows    */
    double lr, grad_norm;        /* step: the update's learning rate and gradient norm        */
    double ms;                   /* wall time of the step / of the validation                 */
    double tokens_per_s;         /* step: B T accum / its time                                */
    double mfu;                  /* step: model FLOP utilisation against peak_flops (0..1);
                                    NaN when peak_flops is 0, and from the first step faster
                                    than a measured peak on (it was measured low)             */
    int64_t tokens;              /* tokens of the step (B T accum) / of the validation        */
    int64_t mem_used_bytes;      /* every memory node together, after the step                */
    int64_t mem_peak_bytes;
    int validates;               /* step: a validation follows it                             */
    int saved_best;              /* validation: its loss is the lowest: best_checkpoint written */
    int requested;               /* checkpoint: asked for (nnt_trainer_request_save, SIGUSR1 with
                                    nnt_trainer_handle_signals, on any rank), not save_every's */
    /* new in 0.3 (read them only when size covers them) */
    double dpo_accuracy;         /* DPO step / validation: the share of pairs whose chosen
                                    reward beta (pi_c - ref_c) beats the rejected one's (TRL's
                                    rewards/accuracies); a reward model's: the share whose
                                    chosen score is higher (RewardTrainer's accuracy); 0
                                    otherwise                                                */
    double dpo_margin;           /* DPO: the mean of the chosen reward minus the rejected one
                                    (TRL's rewards/margins); a reward model's: of the chosen
                                    score minus the rejected one (its margin); unpaired rows
                                    (KTO): over the micro-batches holding both kinds, the
                                    mean desirable reward beta lr minus the undesirable one
                                    (TRL's rewards/margins; dpo_accuracy 0); 0 otherwise     */
    /* new in 0.3 (read them only when size covers them) */
    double accuracy;             /* a classifier's (num_labels >= 2) validation: the share of
                                    its examples whose largest logit is their label; a
                                    multi-label one's (0.4): the share of its examples'
                                    labels whose sigmoid(logit) > 0.5 when their value
                                    is; else 0                                               */
    int64_t examples;            /* that validation's examples (its counted targets; 0.4:
                                    a multi-label classifier's examples)                     */
    /* new in 0.4 (read it only when size covers it) */
    double kl;                   /* NNT_DPO_KTO: the mean over the step's (validation's)
                                    micro-batches of their kl estimate (TRL's kl); else 0    */
    /* new in 0.4, later (read them only when size covers them) */
    double exact_match;          /* a multi-label classifier's validation: the share of its
                                    examples whose every label is right (sigmoid(logit) > 0.5
                                    when the value is; scikit-learn's accuracy_score of the
                                    label sets); else 0                                      */
    double f1;                   /* a multi-label classifier's validation: the micro F1 of
                                    its labels, 2 TP / (2 TP + FP + FN) over every example's
                                    labels (f1_score average="micro"; 0 with no positive
                                    label and no positive prediction); else 0                */
    double mae;                  /* a regression's validation: the mean absolute error of
                                    its examples' values (its loss is the mean squared one);
                                    else 0                                                   */
} nnt_trainer_report;

/* 0 goes on; any other value asks the trainer to stop as nnt_trainer_request_stop does. */
typedef int (*nnt_trainer_callback)(const nnt_trainer_report *report, void *user);

typedef struct nnt_trainer_options {
    size_t size;                 /* sizeof(nnt_trainer_options), set by the init macro        */
    int64_t batch, seq;          /* B, T: the model's batch shape                             */
    int64_t tile_batch, tile_seq; /* tiles of its (B, T) inputs: the tiling's batch and seq it
                                    was created with; 0: nnt_model_tiling's automatic ones     */
    int64_t accum;               /* micro-batches a step (>= 1): the optimizer's accum_steps   */
    int64_t steps;               /* steps of the whole run (>= 0; 0: nnt_trainer_validate only) */
    uint64_t seed;               /* the shuffled order; the rng words saved in checkpoints     */
    int shuffle;                 /* 0: windows of B T + 1 consecutive tokens, wrapping; 1:
                                    sequences of T + 1 tokens at multiples of T in a new
                                    pseudorandom order each epoch                              */
    int64_t train_tokens;        /* train on the data's first train_tokens (0: all of them)    */
    nnt_data *val_data;          /* where the held-out tokens are; NULL: the training data     */
    int64_t val_start, val_len;  /* the held-out tokens [val_start, val_start + val_len)      */
    int64_t val_batches;         /* windows of B T + 1 tokens a validation reads (0: none)     */
    int64_t val_every;           /* validate every val_every steps (0: none) and after the last */
    const char *checkpoint;      /* path of the periodic checkpoints and of nnt_trainer_save
                                    with no path; NULL: none                                   */
    int64_t save_every;          /* a checkpoint every save_every steps (0: none), not at the last */
    const char *best_checkpoint; /* written when a validation loss is the lowest; NULL: none   */
    double peak_flops;           /* FLOP/s the MFU is against; 0: no MFU                       */
    const char *trace;           /* trace the steps from the run's second (nnt_trace_start):
                                    the timeline file; NULL: no trace                          */
    const char *trace_table;     /* its per-op table (nnt_trace_stop)                          */
    int64_t trace_steps;         /* steps traced                                               */
    const char *program;         /* "program" of the recorded options string (NULL: "nnt")     */
    const char *extra_options;   /* JSON members ("\"key\": value, ...") appended to it, or NULL */
    nnt_trainer_callback callback;  /* after each step and validation; may be NULL             */
    void *user;                  /* its second argument                                        */
    const char *log_dir;         /* the run's log (created; rank 0 writes it): train.csv (step,
                                    loss, lr, grad_norm, ms, tokens_per_s, mfu, each memory
                                    node's used and peak MiB), val.csv (step, val_loss, tokens)
                                    with validation, loss.svg (both curves) at the end of each
                                    nnt_trainer_run; a resumed run keeps their rows up to its
                                    step. Opened at the first step (steps 0: none). NULL: none */
    int measure_peak;            /* 1: peak_flops measured at creation on the CPU workers (a
                                    GEMM task of 512 x 1024 x 1024 each, at the context's
                                    precision) when there is no CUDA worker; peak_flops stays
                                    the peak when it cannot be measured                         */
    const char *resume;          /* a checkpoint continued at creation (nnt_trainer_resume);
                                    NULL: none                                                  */
    int keep_previous;           /* 1: at creation (after resume), when checkpoint or
                                    log_dir/checkpoint.safetensors is another run's (it exists
                                    and was not resumed: resume names neither it nor a file in
                                    log_dir), the files of that run move to log_dir/previous-N
                                    (the first N free) on rank 0: checkpoint,
                                    best_checkpoint, trace_table, log_dir's
                                    checkpoint.safetensors, train.csv, val.csv, loss.svg and
                                    the names of keep_also (nnt_trainer_info.kept_previous)    */
    const char *keep_also;       /* other names of log_dir moved with them, comma-separated    */
    int update_in_backward;      /* -1 (default): each step's last backward updates the
                                    parameters (nnt_optim_update_in_backward) when the
                                    optimizer allows it (grad_clip 0), unless the environment
                                    has NNT_UPDATE_IN_BACKWARD=0; 0: never (the separate step,
                                    gradients kept after it); 1: always (NNT_E_STATE at
                                    creation when the optimizer clips)                     */
    /* new in 0.3 (a size without it gets 0) */
    double dpo_beta;             /* > 0: direct preference optimization (DPO, TRL's sigmoid
                                    loss) with this beta on pairs of rows: the data (and the
                                    held-out data) rows of T tokens with a loss mask, row 2p a
                                    pair's chosen sequence and 2p + 1 its rejected one
                                    (nnt-tokenize --preference); B even (B / 2 pairs a
                                    micro-batch); the reference is the model before its first
                                    update (nnt_trainer_create(3); none for the losses that
                                    need none, NNT_DPO_CPO, _SIMPO, _ORPO); 0: the
                                    cross-entropy                                           */
    int dpo_loss;                /* with dpo_beta: nnt_dpo_loss, TRL's loss_type               */
    double reward_center;        /* a reward model's (a model of num_labels 1: trained on pairs
                                    of rows as DPO reads them, TRL's RewardTrainer loss): the
                                    weight of the mean of (r_c + r_r)^2 in its loss (TRL's
                                    center_rewards_coefficient); 0: none                     */
    /* new in 0.4 (a size without them gets their defaults, TRL's: 0.5, 1 and 0) */
    double simpo_gamma;          /* NNT_DPO_SIMPO: the target margin gamma (TRL's simpo_gamma) */
    double cpo_alpha;            /* NNT_DPO_CPO and _SIMPO: the weight of the chosen
                                    sequences' negative log-likelihood in the loss (TRL's
                                    cpo_alpha; 0: SimPO as its paper trains)                  */
    double rpo_alpha;            /* the losses against a reference on pairs (NNT_DPO_SIGMOID,
                                    _IPO, _HINGE, _ROBUST ... _SIGMOID_NORM): the same term's
                                    weight added to DPO's loss (RPO; TRL's DPOTrainer with
                                    loss_type [..., "sft"] and this loss weight); 0
                                    (default): none                                          */
    double desirable_weight;     /* NNT_DPO_KTO and _APO_ZERO_UNPAIRED: the weight of a
                                    desirable row's loss (TRL's desirable_weight; default 1) */
    double undesirable_weight;   /* and of an undesirable one's (undesirable_weight; 1)      */
    /* new in 0.4, later (a size without them: no early stop) */
    int64_t early_stop;          /* > 0: stop the run after the validation that makes this many
                                    in a row whose loss is not below the lowest before it by
                                    more than early_stop_delta (transformers'
                                    EarlyStoppingCallback, early_stopping_patience and
                                    _threshold; nnt_trainer_info.early_stop_step); needs
                                    validations (val_batches > 0). 0: never                 */
    double early_stop_delta;     /* >= 0 (default 0: any lower loss is an improvement)        */
    /* new in 0.4, later still (a size without them: none) */
    double label_smoothing;      /* in [0, 1): the language-model loss against (1 - it) one-hot
                                    + it / V (transformers' label_smoothing_factor,
                                    nnt_layer_set_label_smoothing): training and validation
                                    losses are the smoothed ones; not with dpo_beta (its
                                    losses are log-likelihoods) nor a classifier or reward
                                    model (NNT_E_INVAL). 0: none (the model's own setting is
                                    left as it is)                                         */
    double neftune_alpha;        /* > 0: NEFTune noise on the embeddings of the training
                                    forwards (transformers' neftune_noise_alpha, e.g. 5;
                                    nnt_layer_set_neftune with seed), none in validations;
                                    not with dpo_beta (NNT_E_INVAL). 0: none (the model's own
                                    setting is left as it is)                              */
    /* new in 0.4, last (a size without them: 0 and TRL's 0.05) */
    double dpo_label_smoothing;  /* NNT_DPO_ROBUST, _AOT, _AOT_UNPAIRED: the probability that
                                    a pair's preference is flipped, in [0, 0.5);
                                    NNT_DPO_EXO_PAIR: its epsilon, in (0, 1) (TRL's
                                    label_smoothing; 1e-3 in EXO's paper); 0 with the other
                                    losses                                                   */
    double discopop_tau;         /* NNT_DPO_DISCOPOP: its temperature tau (> 0; TRL's
                                    discopop_tau, default 0.05)                              */
} nnt_trainer_options;

/* nnt_trainer_options.dpo_loss (new in 0.3): TRL's DPOTrainer loss types. */
typedef enum nnt_dpo_loss {
    NNT_DPO_SIGMOID = 0,         /* -log sigmoid(beta d), d the difference of the summed log
                                    ratios (DPO; the default)                                */
    NNT_DPO_IPO = 1,             /* (d' - 1 / (2 beta))^2, d' of the log ratios averaged over
                                    each sequence's counted targets (IPO)                    */
    NNT_DPO_HINGE = 2,           /* max(0, 1 - beta d) (SLiC)                                  */
    /* new in 0.4: without a reference model (no reference pass; TRL's CPOTrainer and
     * ORPOTrainer). pi_c, pi_r the policy's log-likelihoods summed over the counted targets,
     * a_c, a_r their per-target means, nll the mean negative log-likelihood of the
     * micro-batch's chosen sequences' counted targets; the rewards beta pi (CPO) or beta a */
    NNT_DPO_CPO = 3,             /* -log sigmoid(beta (pi_c - pi_r)) + cpo_alpha nll (CPO,
                                    CPOTrainer's loss_type "sigmoid")                        */
    NNT_DPO_SIMPO = 4,           /* -log sigmoid(beta (a_c - a_r) - simpo_gamma)
                                    + cpo_alpha nll (SimPO, CPOTrainer's loss_type "simpo")   */
    NNT_DPO_ORPO = 5,            /* nll' - beta log sigmoid((a_c - a_r) - (log(1 - e^a_c) -
                                    log(1 - e^a_r))) (ORPO, beta its lambda), nll' over the
                                    chosen rows' prompt and completion: every target up to
                                    the row's last counted one (ORPOTrainer)                 */
    /* new in 0.4: unpaired rows (TRL's KTOTrainer): the data one example a row with one row
     * value, its label (1: desirable, 0: undesirable; nnt-tokenize --unpaired); B rows a
     * micro-batch, read in runs of B rows (shuffle: the runs' order); lr = pi - ref of a row
     * (its summed log ratio against the reference, the model before its first update) */
    NNT_DPO_KTO = 6,             /* mean over the micro-batch of desirable_weight (1 -
                                    sigmoid(beta (lr - kl))) for a desirable row,
                                    undesirable_weight (1 - sigmoid(beta (kl - lr))) for an
                                    undesirable one; kl = max(0, mean over the micro-batch
                                    of the log ratio of its KL rows, each row's prompt
                                    followed by the completion of the row before it in its
                                    run of B, the first taking the last's), not
                                    differentiated (KTO; B >= 2)                             */
    NNT_DPO_APO_ZERO_UNPAIRED = 7,   /* desirable_weight (1 - sigmoid(beta lr)),
                                    undesirable_weight sigmoid(beta lr) (APO-zero unpaired;
                                    no KL rows)                                              */
    /* new in 0.4, later: TRL's other DPOTrainer loss types on pairs, against the reference;
     * lc, lr the chosen and rejected sequences' log ratios (summed), d = lc - lr, z = beta d,
     * e dpo_label_smoothing, ls(x) = log sigmoid(x) */
    NNT_DPO_ROBUST = 8,          /* (-(1 - e) ls(z) + e ls(-z)) / (1 - 2 e) (robust DPO)      */
    NNT_DPO_EXO_PAIR = 9,        /* sigmoid(z) (ls(z) - log(1 - e)) + sigmoid(-z) (ls(-z) -
                                    log e) (EXO, e > 0)                                     */
    NNT_DPO_NCA_PAIR = 10,       /* -ls(beta lc) - ls(-beta lc) / 2 - ls(-beta lr) / 2 (NCA)   */
    NNT_DPO_BCO_PAIR = 11,       /* -ls(beta lc) - ls(-beta lr) (TRL's bco_pair, stateless)    */
    NNT_DPO_SPPO_HARD = 12,      /* (lc - 1 / (2 beta))^2 + (lr + 1 / (2 beta))^2 (SPPO, hard
                                    probabilities)                                           */
    NNT_DPO_APO_ZERO = 13,       /* 1 - sigmoid(beta lc) + sigmoid(beta lr) (APO-zero)        */
    NNT_DPO_APO_DOWN = 14,       /* sigmoid(beta lc) + 1 - sigmoid(z) (APO-down)              */
    NNT_DPO_DISCOPOP = 15,       /* -ls(z) (1 - m) + exp(-z) m, m = sigmoid(z / discopop_tau)
                                    (DiscoPOP)                                               */
    NNT_DPO_SIGMOID_NORM = 16,   /* -ls(beta d'), d' of the log ratios averaged over each
                                    sequence's counted targets (TRL's sigmoid_norm)           */
    /* the micro-batch's pairs together (its B / 2 pairs as TRL's batch): position i of a
     * sorted order, u the i-th smallest of one value and v of another, delta = u - v,
     * the term -(1 - e) ls(beta delta) - e ls(-beta delta) */
    NNT_DPO_AOT = 17,            /* u of pi_chosen - pi_rejected, v of ref_chosen -
                                    ref_rejected (AOT, paired)                               */
    NNT_DPO_AOT_UNPAIRED = 18    /* u of lc, v of lr (TRL's aot_unpaired: pairs of data all
                                    the same)                                                */
} nnt_dpo_loss;

#define NNT_TRAINER_OPTIONS_INIT \
    { sizeof(nnt_trainer_options), 1, 1, 0, 0, 1, 1, 1, 0, 0, NULL, 0, 0, 0, 0, NULL, 0, \
      NULL, 0.0, NULL, NULL, 1, NULL, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, -1, 0.0, \
      NNT_DPO_SIGMOID, 0.0, 0.5, 1.0, 0.0, 1.0, 1.0, 0, 0.0, 0.0, 0.0, 0.0, 0.05 }

/* The trainer's state (nnt_trainer_info_get). */
typedef struct nnt_trainer_info {
    size_t size;                 /* sizeof(nnt_trainer_info): set it before the call           */
    int64_t step;                /* updates done (resumed ones included)                       */
    uint64_t data_pos;           /* next window's token offset; shuffled: sequences read       */
    uint64_t rng[4];             /* the rng words (seeded from seed, saved and resumed)        */
    int stopped;                 /* the run stopped at a request (of any rank, under MPI)      */
    double best_val_loss;        /* the loss best_checkpoint holds; HUGE_VAL when none         */
    double flops_per_token;      /* 6 N + 4 Nf + 12 L T NH hd, the MFU's numerator per token
                                    (N trained and Nf frozen parameters that products read:
                                    not a position table, nor a token table without a tied
                                    head, which lookups read; since 0.3)                     */
    double peak_flops;           /* the MFU's peak: peak_flops, or the measured one            */
    int peak_measured;           /* 1: peak_flops was measured (measure_peak)                  */
    int64_t validations;         /* validations done, with those of a resumed val.csv          */
    int64_t last_val_step, lowest_val_step;   /* the last and the lowest (the first of equals)
                                    of them (valid when validations > 0)                       */
    double last_val_loss, lowest_val_loss;
    /* the tokens and parameters */
    int64_t train_tokens;        /* tokens trained on (0 without training data)                */
    int64_t held_out;            /* the training data's tokens after them, held out            */
    int64_t val_tokens;          /* the held-out tokens validations read from (val_len)        */
    int64_t val_batches;         /* windows of B T + 1 tokens a validation reads               */
    int64_t params, frozen;      /* elements of the model's parameters, of its frozen ones     */
    double lr, min_lr;           /* the optimizer's peak learning rate and floor               */
    int tokenizer;               /* nnt_trainer_open's tokenizer (nnt_tokenizer_kind, resolved);
                                    NNT_TOKENIZER_AUTO for nnt_trainer_create's               */
    const char *kept_previous;   /* keep_previous: the directory the other run's files went to
                                    (valid while the trainer lives); NULL: none moved           */
    /* the steps of this trainer (not those before a resume) */
    int64_t steps_run;           /* steps done                                                 */
    double last_loss;            /* the last one's loss                                        */
    double step_ms;              /* mean time of a step, without the first (0: fewer than 2)   */
    int64_t validations_run;     /* validations done, and their time                           */
    double validation_s;
    double tokens_per_s;         /* tokens a second at step_ms                                 */
    double mfu;                  /* model FLOP utilisation at step_ms; NaN without a peak, or
                                    when a step (or this mean) beat a measured peak: peak_low  */
    int peak_low;                /* 1: the measured peak was low (a busy machine at start)     */
    int stop_signal;             /* the signal (SIGINT, SIGTERM) that asked this process's run
                                    to stop (nnt_trainer_handle_signals); 0: none            */
    /* new in 0.4 (a size without it, as 0.3 set, gets the fields above only) */
    int64_t early_stop_step;     /* the step whose validation stopped the run (early_stop;
                                    stopped is 1 too); 0: none                              */
} nnt_trainer_info;

#define NNT_TRAINER_INFO_INIT \
    { sizeof(nnt_trainer_info), 0, 0, { 0, 0, 0, 0 }, 0, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0.0, 0.0, \
      0, 0, 0, 0, 0, 0, 0.0, 0.0, NNT_TOKENIZER_AUTO, NULL, 0, 0.0, 0.0, 0, 0.0, 0.0, 0.0, 0, 0, \
      0 }

/* A trainer of model (a model of nnt_model_create / nnt_model_load_hf / nnt_gpt_*, created
 * for batches of (batch, seq)) with opt (its parameters added) on data (may be NULL when
 * steps is 0). model, opt, data and val_data must outlive it; paths are copied. */
NNT_API int nnt_trainer_create(nnt_layer *model, nnt_optim *opt, nnt_data *data,
                               const nnt_trainer_options *opts, nnt_trainer **out);
NNT_API void nnt_trainer_destroy(nnt_trainer *tr);
/* One step (gradients cleared, accum forward/backward, one update), then the validation and
 * checkpoint due after it; the callback reports each. */
NNT_API int nnt_trainer_step(nnt_trainer *tr);
/* Steps until step until (<= 0 or past steps: steps) or a stop request; with steps 0 one
 * validation. */
NNT_API int nnt_trainer_run(nnt_trainer *tr, int64_t until);
/* The mean loss over the held-out windows (forward only), reported and kept as the best
 * when it is; loss may be NULL. */
NNT_API int nnt_trainer_validate(nnt_trainer *tr, double *loss);
/* The training state (parameters, optimizer, data position, rng, options string) to path
 * (NULL: the checkpoint option). */
NNT_API int nnt_trainer_save(nnt_trainer *tr, const char *path);
/* Continue from a file of nnt_trainer_save: parameters, optimizer, step, data position, rng,
 * the best validation loss. */
NNT_API int nnt_trainer_resume(nnt_trainer *tr, const char *path);
/* Async-signal-safe (sets a flag only): the run stops after the step in progress. Under
 * MPI the ranks agree at each step boundary: a request on any rank stops (or, for
 * nnt_trainer_request_save, saves) every rank after the same step. */
NNT_API int nnt_trainer_request_stop(nnt_trainer *tr);
/* Ask for a checkpoint after the step in progress (or the next one), written to the
 * options' checkpoint path, the run going on (e.g. on SIGUSR1, a scheduler's warning before
 * a time limit); a NNT_TRAINER_CHECKPOINT report follows it. Async-signal-safe: it only
 * sets a flag; NNT_E_STATE (no message) when the trainer has no checkpoint path. */
NNT_API int nnt_trainer_request_save(nnt_trainer *tr);
/* on 1: SIGINT and SIGTERM stop the run after the step in progress (stop_signal in
 * nnt_trainer_info says which; the caller then saves), a second one gets the action there was
 * before (by default the process ends at once); SIGUSR1 asks for a checkpoint as
 * nnt_trainer_request_save (without a checkpoint path: a warning in the log). on 0: the
 * actions there were before, put back (also when the trainer is destroyed). One trainer at a
 * time (NNT_E_STATE for another); the handlers only set flags. */
NNT_API int nnt_trainer_handle_signals(nnt_trainer *tr, int on);
NNT_API int nnt_trainer_info_get(const nnt_trainer *tr, nnt_trainer_info *info);

/* What nnt_trainer_text writes: the text nnt-train prints. */
typedef enum nnt_trainer_text_kind {
    NNT_TRAINER_TEXT_MODEL = 0,   /* the model: family, sizes, options, parameters             */
    NNT_TRAINER_TEXT_REPORT = 1,  /* a report's line: a step's figures and memory nodes, or a
                                     validation's loss                                        */
    NNT_TRAINER_TEXT_LIVE = 2,    /* a step's short line with the smoothed loss and the time
                                     left (a terminal's line redrawn in place)                 */
    NNT_TRAINER_TEXT_RUN = 3,     /* this trainer's steps (time, mean rates, last loss) and
                                     validations (the last, the lowest, their time)           */
    NNT_TRAINER_TEXT_MEMORY = 4,  /* the memory nodes' peak use, bytes moved, waits          */
    NNT_TRAINER_TEXT_SUMMARY = 5, /* the run, a labelled line each: the model and its weights,
                                     fine-tuning, data, validation, tiling, runtime,
                                     optimizer, a resume and what it changes                 */
    NNT_TRAINER_TEXT_WARNINGS = 6,/* what makes the run doubtful (too little data), a line
                                     each; empty when nothing does                          */
    NNT_TRAINER_TEXT_FILES = 7    /* the files the trainer wrote, "  PATH  (what it is)" each */
} nnt_trainer_text_kind;

/* The text of what (report: the callback's, for REPORT and LIVE) into buf (cap bytes,
 * NUL-terminated; lines separated by newlines, none at the end). width > 0: the fields of a
 * REPORT or LIVE line that would reach column width are left out, the first ones kept; the
 * lines of the other kinds are broken before it (at ", " or "; " where they can) and go on
 * indented to column 11, their labels' (width 0, or below 24: any length). Too small a
 * buffer is NNT_E_INVAL. See nnt_trainer_text(3) for the formats. */
NNT_API int nnt_trainer_text(const nnt_trainer *tr, nnt_trainer_text_kind what,
                             const nnt_trainer_report *report, int width, char *buf,
                             size_t cap);

/* A whole run described by names, as nnt-train's options describe it (nnt_trainer_open). */
typedef struct nnt_run_config {
    size_t size;                  /* sizeof(nnt_run_config), set by the init macro           */
    /* the model */
    const char *model_source;     /* nnt_model_open's source: a Hugging Face directory, an
                                     llm.c checkpoint, GPT-2 weights in a safetensors file, a
                                     preset; NULL: a fresh model of model_config             */
    const nnt_model_config *model_config;  /* a fresh model's configuration (vocab 0: the
                                     tokenizer's), or GPT-2 weights'; NULL with a source that
                                     has its own. Both NULL with a resume: the checkpoint's
                                     model (a fine-tuning run's base from the source it
                                     recorded)                                               */
    const nnt_tiling *tiling;     /* overrides of nnt_model_tiling (0 automatic, -1 one tile);
                                     NULL: automatic                                         */
    int recompute;                /* keep block outputs only (nnt_layer_set_recompute)       */
    nnt_precision precision;      /* set on the context (nnt_ctx_set_precision)              */
    /* the tokenizer of text data (and of what the caller generates) */
    nnt_tokenizer_kind tokenizer;
    const char *tokenizer_json;   /* JSON: a tokenizer.json or its directory                 */
    const char *bpe_vocab, *bpe_merges;   /* BPE: GPT-2's vocab.json and merges.txt          */
    /* the tokens */
    const char *data;             /* training tokens (nnt_data_open's path: a file, a
                                     directory, a pattern); not read with steps 0 and val_data */
    nnt_data_format data_format;
    const char *val_data;         /* held-out tokens, read like data; NULL: the last val_split
                                     of data (rounded down to whole rows of row-laid data)   */
    double val_split;             /* 0 <= val_split < 1; 0: none                             */
    int64_t val_batches;          /* windows of B T + 1 held-out tokens a validation reads, at
                                     most as many as they hold; 0: all they hold             */
    /* fine-tuning (nnt_layer_freeze, nnt_model_load_peft, nnt_model_lora_add, in this order) */
    const char *freeze;           /* glob patterns of parameters, comma-separated            */
    const char *load_peft;        /* a PEFT adapter directory                                 */
    const nnt_lora_options *lora; /* adapters to add (seed 0: the trainer's seed); NULL: none */
    /* the optimizer (NULL: NNT_OPTIM_OPTIONS_INIT): total_steps and accum_steps are the
     * trainer's steps and accum, the schedule constant with steps 0; lr < 0: 3e-4 for weights
     * of a source, else by the model's N parameters 3e-3 (N < 10M), 6e-4 (N < 200M) or
     * 3e-4; min_lr < 0: lr / 10; the WSD schedule's decay_steps 0: a tenth of the steps
     * (rounded up) */
    const nnt_optim_options *optim;
    /* new in 0.4 (a size without it, as 0.3 set, gets its default) */
    int freeze_mode;              /* how freeze, load_peft and lora freeze (nnt_freeze_mode):
                                     0 as before (NNT_FREEZE; lora's own freeze_base);
                                     NNT_FREEZE_NF4 keeps the frozen matrices in NF4
                                     (QLoRA: a Hugging Face source's read into NF4 directly,
                                     never whole in fp32), NNT_FREEZE_KEEP_FP32              */
    int64_t num_labels;           /* > 0: the model a classifier of this many labels (1: a
                                     reward model, trained on pairs); a language model's
                                     Hugging Face directory then gives every weight but its
                                     head (transformers' AutoModelForSequenceClassification:
                                     the score initialised from the seed); 0: the source's or
                                     configuration's own                                     */
    int64_t pad_token_id;         /* >= 0: a classifier's pad id (TRL sets the tokenizer's:
                                     pad_token, else eos_token; nnt_sft_pad_id); -1: its own  */
    int problem_type;             /* >= 0: the classifier's nnt_model_config.problem_type
                                     (NNT_PROBLEM_*: regression and multi-label train on the
                                     data rows' values); -1: the source's or configuration's
                                     own (new in 0.4: a size without it gets -1)             */
} nnt_run_config;

#define NNT_RUN_CONFIG_INIT \
    { sizeof(nnt_run_config), NULL, NULL, NULL, 0, NNT_PRECISION_FP32, NNT_TOKENIZER_AUTO, \
      NULL, NULL, NULL, NULL, NNT_DATA_AUTO, NULL, 0.0, 0, NULL, NULL, NULL, NULL, 0, 0, -1, -1 }

/* A trainer of the run run describes, owning what it builds: the context's precision, the
 * tokenizer, the model (nnt_model_open for batch x seq with the tiling's overrides,
 * recompute), its fine-tuning, the training and held-out tokens, the optimizer (every
 * trained parameter), then nnt_trainer_create with opts (NULL: the defaults), whose
 * tile_batch, tile_seq, train_tokens, val_data, val_start, val_len and val_batches come from
 * the run. Its checkpoints record the run's description besides the loop's options (keys in
 * nnt_trainer_open(3)); a fine-tuning run's also record a checksum of its frozen parameters,
 * which nnt_trainer_resume compares (another base: NNT_E_FORMAT). A failure about one field
 * of run or opts has a message that starts with the field's name and a colon. */
NNT_API int nnt_trainer_open(nnt_ctx *ctx, const nnt_run_config *run,
                             const nnt_trainer_options *opts, nnt_trainer **out);
/* The model, optimizer, training data (NULL: none) and tokenizer (NULL with a trainer of
 * nnt_trainer_create) a trainer works with, valid while it lives; any pointer may be NULL. */
NNT_API int nnt_trainer_parts(const nnt_trainer *tr, nnt_layer **model, nnt_optim **opt,
                              nnt_data **data, nnt_tokenizer **tok);


/* ---- several processes: StarPU-MPI ------------------------------------------------------ */
/* Which rank owns (stores and computes) each tile of a tensor when a context runs over MPI
 * (nnt_ctx_options.mpi = 1). Every rank calls the same nnt functions in the same order; a
 * task runs on the rank that owns the tile it writes, and StarPU-MPI sends the tiles it
 * reads from their owners. Results are the same as in one process (the same tasks in the
 * same order), with NNT_DIST_ROOT and NNT_DIST_SHARDED.
 *   NNT_DIST_ROOT     rank 0 owns every tile (the other ranks only follow): a reference
 *   NNT_DIST_SHARDED  tile i of the k-th tensor created in the context belongs to rank
 *                     (k + i) mod size, except the parameters that layers create (each
 *                     tile on the rank holding the fewest bytes of parameter tiles so far;
 *                     a parameter's gradient and optimizer moments where the parameter
 *                     is) and the activations that layers create (and a model's tokens):
 *                     by their (batch, sequence) tile, in blocks of rows per rank.
 *                     Parameters, gradients, optimizer moments and
 *                     activations are spread over the ranks (about 1/size of the state
 *                     each) and weights travel to where they are used; a weight gradient
 *                     is computed on its owner, from activations sent there
 *   NNT_DIST_DATA     data parallel: the same placement as NNT_DIST_SHARDED, so each rank
 *                     runs the forward and backward of its share of every batch and
 *                     updates its share of the parameters (sent to the others when they
 *                     read them), but a product summed over rows owned by several
 *                     ranks (weight gradients dW = dY^T X) is summed where the rows are:
 *                     the result's tile travels to each rank in turn, which adds its own
 *                     rows in one process's order, and back to its owner; unless the rows
 *                     going to the result's owner, as under NNT_DIST_SHARDED, would send
 *                     less than 0.8 times the bytes (few rows per tile; counted per
 *                     product from the tiles' sizes and owners; with more than two ranks
 *                     always the rows, as travelling tiles hang there with StarPU-MPI
 *                     1.3.10). Either way the same
 *                     sums in the same order, so the same results as one process, bit
 *                     for bit. Tensors created through nnt_tensor_create are cyclic over
 *                     their tiles. */
typedef enum nnt_distribution {
    NNT_DIST_ROOT = 0,
    NNT_DIST_SHARDED = 1,
    NNT_DIST_DATA = 2
} nnt_distribution;


/* ---- diagnostics: logging and task traces ----------------------------------------------- */
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

/* Record every task (worker, codelet, start/end, time waiting for data) from now on. */
NNT_API int nnt_trace_start(nnt_ctx *ctx);
/* Stop recording; write an SVG timeline (one row per worker, tasks coloured by kind, idle
 * and data waits visible) to svg_path and a per-op table (count, total and mean ms, share)
 * to table_path ("-" = stdout); either path may be NULL. Under MPI both calls are
 * collective and rank 0 writes every rank's workers ("rank R CPU 0"); see nnt_trace_start(3). */
NNT_API int nnt_trace_stop(nnt_ctx *ctx, const char *svg_path, const char *table_path);


/* ---- GPT-2 layers of the older API (nnt 0.2) --------------------------------------------
 * Kept ABI-compatible: a GPT layer is the GPT-2 model of nnt_model_create. New programs
 * use nnt_model_preset, nnt_model_create, nnt_model_load_hf, nnt_model_generate and the
 * trainer, which serve every family the same way. */
typedef struct nnt_gpt_config {
    size_t size;                 /* sizeof(nnt_gpt_config), set by the init macro            */
    int64_t vocab;               /* V                                                        */
    int64_t max_seq;             /* maxT: rows of the position embedding                     */
    int64_t layers;              /* L                                                        */
    int64_t heads;               /* NH                                                       */
    int64_t channels;            /* C, a multiple of NH; the MLP hidden size is 4C           */
} nnt_gpt_config;

/* GPT-2 124M. */
#define NNT_GPT_CONFIG_INIT { sizeof(nnt_gpt_config), 50257, 1024, 12, 12, 768 }

/* Configuration of a named preset: "gpt2" (124M), "gpt2-medium" (355M), "gpt2-large"
 * (774M), "gpt2-xl" (1558M), "tiny" (L 2, C 64, NH 4, V 256, maxT 128: the demo). */
NNT_API int nnt_gpt_preset(const char *name, nnt_gpt_config *cfg);
/* Resolve the 0 (automatic) entries of overrides (NULL: all automatic) for batches of
 * (B, T) on the context's workers, by the documented heuristic (nnt_gpt_tiling(3)); the
 * result has every entry > 0. */
NNT_API int nnt_gpt_tiling(nnt_ctx *ctx, const nnt_gpt_config *cfg, int64_t B, int64_t T,
                           const nnt_tiling *overrides, nnt_tiling *out);
/* A GPT-2 (NNT_LAYER_GPT: embedding, L blocks, final LayerNorm, tied LM head, cross-entropy)
 * for batches of B sequences of T <= maxT tokens, initialised by nnt_layer_init(seed 0).
 * Its forward takes tokens (B, T) int32 and returns the logits (B, T, V). */
NNT_API int nnt_gpt_create(nnt_ctx *ctx, const nnt_gpt_config *cfg, int64_t B, int64_t T,
                           const nnt_tiling *tiling, nnt_layer **out);
NNT_API int nnt_gpt_config_of(const nnt_layer *gpt, nnt_gpt_config *cfg);
/* Activation recompute: enable != 0 keeps only each block's output for the backward, which
 * recomputes the block's forward first (about one more forward pass of work, much less
 * activation memory; bit-identical results). 0 (the default) keeps every activation.
 * NNT_E_STATE between a forward with targets and its backward. */
NNT_API int nnt_gpt_set_recompute(nnt_layer *gpt, int enable);
/* Create from an llm.c fp32 checkpoint (its configuration and weights). */
NNT_API int nnt_gpt_load_llmc(nnt_ctx *ctx, const char *path, int64_t B, int64_t T,
                              const nnt_tiling *tiling, nnt_layer **out);
/* Create with cfg and load a Hugging Face GPT2LMHeadModel safetensors file. */
NNT_API int nnt_gpt_load_safetensors(nnt_ctx *ctx, const char *path,
                                     const nnt_gpt_config *cfg, int64_t B, int64_t T,
                                     const nnt_tiling *tiling, nnt_layer **out);
/* Write the weights as an llm.c fp32 checkpoint / HF safetensors file (temp + rename). */
NNT_API int nnt_gpt_save_llmc(nnt_layer *gpt, const char *path);
NNT_API int nnt_gpt_save_safetensors(nnt_layer *gpt, const char *path);

/* Append ngen tokens to the prompt (nprompt >= 1 ids) and write them to out[0..ngen);
 * s NULL: greedy. Overwrites the activations; parameters and gradients are untouched. */
NNT_API int nnt_gpt_generate(nnt_layer *gpt, const int32_t *prompt, int64_t nprompt,
                             int64_t ngen, const nnt_sampling *s, int32_t *out);

#ifdef __cplusplus
}
#endif

#endif /* NNT_H */
