/* SPDX-License-Identifier: MIT */
/* Internal declarations shared by the library's translation units. Not installed. */
#ifndef NNT_INTERNAL_H
#define NNT_INTERNAL_H

#include "config.h"

#include "nnt.h"
#include "ctx_alloc.h"

#include <math.h>
#include <pthread.h>
#include <starpu.h>
#include <stdarg.h>

/* CUDA codelets need both our CUDA kernels and a CUDA-enabled StarPU. */
#if defined(NNT_HAVE_CUDA) && defined(STARPU_USE_CUDA)
#define NNT_CUDA_CODELETS 1
#include "nnt_cuda.h"
#include <starpu_cublas_v2.h>
#endif

#if defined(__GNUC__)
#define NNT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define NNT_PRINTF(f, a)
#endif

#define NNT_CTX_MAGIC 0x6e6e7463u     /* "nntc" */
#define NNT_TENSOR_MAGIC 0x6e6e7474u  /* "nntt" */
#define NNT_ERRMSG_MAX 1024

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
    int64_t owned_bytes;          /* bytes of the tiles this rank owns                   */
    int stays;                    /* under MPI, no rank but a tile's owner reads it in a
                                     task (optimizer moments; gradients under
                                     NNT_DIST_SHARDED): the RAM budget counts it on its
                                     owner only                                          */
    int released;                 /* under MPI with release_weights, the ranks drop their
                                     copies of its tiles after each layer's use (parameters
                                     and their bf16 copies): counted like stays, plus the
                                     context's release window                            */
    int deferred;                 /* not counted in the RAM budget yet: a gradient that takes
                                     no memory until its first backward writes it, or the
                                     parameter of a model built unwritten (defer_init),
                                     counted at its first write or when it takes another
                                     dtype (nnt_tensor_count_first_write, _retype)        */
    unsigned rows;                /* placement hint: bit d set when dimension d is a batch
                                     or sequence dimension of an activation (NNT_DIST_DATA
                                     and _SHARDED place such a tile by those coordinates); 0: a
                                     parameter or anything else (cyclic over tiles)       */
    int64_t place_seq;            /* the cyclic owners' offset: the tensor's creation rank
                                     in its context, or that of the tensor it was created
                                     beside (nnt_tensor_create_beside)                    */
    int written;                  /* every tile has been written once: readable. StarPU
                                     aborts on reading a never-written handle, so every
                                     read checks this first (nnt_tensor_check_readable)   */
    int dequantized;              /* a product's NNT_NF4 B dequantized for it alone (lib/ops/
                                     gemm.c): its packs are not kept                      */
    struct nnt_gemm_kept *kept;   /* its tiles kept packed as a product's B, or NULL
                                     (lib/ops/gemm.c; freed by nnt_gemm_kept_free, or by
                                     nnt_gemm_kept_retire: nnt_temp_release, a retype)  */
    /* An NNT_INT32 tensor whose values came from the host (nnt_tensor_copy_from_host, or a
     * fill): their range as seen then, so that a layer checks token ids without reading the
     * tensor back (no wait); ids_known 0 once a task writes it (nnt_tensor_mark_written). */
    int ids_known;
    int32_t ids_min, ids_max;
    int64_t ids_argmin, ids_argmax;  /* the first element (row-major) holding each         */
    /* An NNT_INT32 tensor whose values are known on the host (nnt_tensor_copy_from_host, or
     * nnt_tensor_copy of such a tensor): a copy of them (row-major, ids_host_n of them; 0:
     * none, e.g. after a task wrote the tensor), for operations that plan their tasks by
     * them (the attention's positions skip the tile pairs wholly across examples). Not a
     * licence to check values written by tasks: ids_known stays as it was. */
    int32_t *ids_host;            /* owned; may outlive ids_host_n (reused)               */
    int64_t ids_host_n;
    int kind;                     /* what its tiles hold, NNT_MEM_* (lib/trace/moves.c)   */
    /* The bf16 copy of an fp32 parameter that the bf16 products read (gl_weight_operand),
     * which the optimizer's update writes too (nnt_tensor_adam_step): on the parameter,
     * bf16_copy; on the copy, copy_src and, per tile, the version of copy_src's tile whose
     * values it holds (nnt_handle_version + 1; 0: none). Unlinked when either goes. */
    struct nnt_tensor *bf16_copy, *copy_src;
    uint64_t *copy_versions;      /* (ntiles) on a copy                                   */
};

struct nnt_ctx {
    unsigned magic;
    int ncpus, ncuda;
    const char *sched;
    char kernels[2048];           /* CPU kernels chosen at start (nnt_ctx_kernels)       */
    char errmsg[NNT_ERRMSG_MAX];
    pthread_mutex_t lock;         /* guards the tensor list and errmsg                   */
    nnt_tensor *tensors;          /* live tensors, to orphan them on destroy             */
    int disk_node;                /* StarPU disk memory node, -1 without swap            */
    int64_t ram_budget;           /* bytes StarPU may use in RAM (0: no limit)           */
    int ram_budget_default;       /* ram_budget is StarPU's own limit, none was given    */
    int node_ranks;               /* the ranks of this job on this node (1 in one process):
                                     they share the default budget                       */
    int64_t ram_kept;             /* of ram_budget, the room of freed tiles kept for reuse
                                     under a swap (lib/ctx_ram.c): not for tasks' tiles   */
    int defer_init;               /* > 0: layers made now leave their parameters unwritten
                                     (nnt_model_build_uninit: the caller initialises once) */
    int64_t swap_bytes;           /* size of the disk swap (0: none)                     */
    int64_t tile_bytes;           /* bytes of all registered tiles (guarded by lock); with
                                     ram_chunked, as StarPU allocates them in RAM
                                     (nnt_alloc_bytes)                                    */
    int ram_chunked;              /* StarPU pins RAM and suballocates small tiles in
                                     32 MiB chunks (CUDA workers, pinning not disabled, or
                                     the test hook NNT_TEST_PINNED_RAM=1): lib/ctx_alloc.c */
    int64_t small_bytes;          /* with ram_chunked: bytes of the registered tiles that
                                     StarPU suballocates, rounded (guarded by lock)       */
    int64_t deferred_tensors;     /* live tensors not counted yet (nnt_tensor.deferred;
                                     guarded by lock)                                     */
    int64_t deferred_bytes;       /* ... and the bytes of their tiles (guarded by lock)   */
    int64_t peak_chunks;          /* with ram_chunked: the most chunks they took so far   */
    int64_t gpu_budget;           /* bytes StarPU may use on the smallest GPU (0: none)   */
    int cuda_tasks_on_cuda;       /* tasks a CUDA worker can run go to the CUDA workers
                                     only (with CUDA workers, unless NNT_CPU_TASKS=all)   */
    int first_cuda_worker;        /* a CUDA worker's id, for codelets' can_execute        */
    int cuda_attn_products;       /* attention blocks on CUDA workers as products
                                     (cpu/attn_products.c; NNT_CUDA_ATTN=flash: 0)        */
    int optim_on_cpu;             /* NNT_OPTIM_ON=cpu: with CUDA workers, tasks that write
                                     weights or optimizer state run on CPU workers
                                     (nnt_task_writes_host_side)                          */
    nnt_precision precision;      /* of GEMM operands, for tasks submitted from now on   */
    int pack_b;                   /* products pack shared B tiles (nnt_gemm_packs)       */
    int pack_keep;                /* ... into packs kept with B while its tiles do not
                                     change (else packs made for one product only)        */
    int64_t pack_keep_max;        /* bytes the kept packs may hold at once (pack_keep)    */
    int pack_keep_given;          /* ... set by NNT_GEMM_PACK_KEEP_MIB                    */
    int ksum;                     /* bf16 products sum their k tiles in one task
                                     (nnt_gemm_ksum_applies; nnt_gemm_sums_k)             */
    int bf16_expanded;            /* the CPU has bf16 dot products, but bf16 products are
                                     float ones on expanded operands by the start-up
                                     choice (nnt_cpu_gemm_choose_bf16)                    */
    int no_dropout;               /* forwards that train nothing (the trainer's validation,
                                     generation): LoRA adapters apply no dropout          */
    int64_t dropout_pass;         /* > 0: the pass the adapters' dropout masks are drawn
                                     for (the trainer's micro-batch number, which a resumed
                                     run knows); 0: each adapter counts its backwards     */
    /* Called by nnt_layer_backward after each layer's backward was submitted (the
     * optimizer, while it updates parameters during a backward: lib/optim); NULL: none. */
    int (*backward_hook)(void *user, struct nnt_layer *l);
    void *backward_hook_user;
    /* StarPU priority of the tasks submitted from now on (nnt_submit; one less for a task that
     * writes a gradient tile). Each layer's forward and backward lowers it by 2
     * (nnt_layer_next_priority), so that among ready tasks the earlier layer's go first, and
     * within a layer's backward the chain to the input gradient goes before the weight
     * gradients: a weight gradient waits only until its layer's input-gradient tasks ran.
     * Both stay 0 unless task_order (NNT_TASK_ORDER=1, off by default: lib/ctx.c). */
    int task_prio;
    int task_order;
    unsigned long debug_faults;   /* nnt_debug_tasks_faults() when the context started */
    int weights_fixed;            /* no parameter changes until cleared (text generation
                                     after its first forward): layers may reuse the bf16
                                     weight copies they made (gl_weight_operand)          */
    /* several processes (lib/mpi/mpi.c): every rank creates the same tensors in the same
     * order, so the counters below agree across ranks */
    int mpi;                      /* running over StarPU-MPI                              */
    int rank, nranks;             /* this process's rank, the job's size (0, 1 without)   */
    int distribution;             /* nnt_distribution of the tiles of new tensors         */
    int release_weights;          /* drop received parameter copies after each layer's use
                                     (nnt_ctx_options.release_weights; 0 in one process)  */
    int64_t tensors_created;      /* tensors created so far: the cyclic owners' offset    */
    int64_t next_tag;             /* StarPU-MPI tag of the next registered handle         */
    int64_t owned_bytes;          /* bytes of live tiles this rank owns (guarded by lock) */
    int64_t min_rank_ram;         /* main memory of the smallest rank, bytes: its mem_cpu
                                     budget, else its node's RAM divided by the ranks on
                                     the node (the same on every rank: decisions that must
                                     agree use it)                                        */
    int64_t stays_bytes;          /* bytes of the tiles of tensors that stay on their owners
                                     (nnt_tensor.stays; guarded by lock)                  */
    int64_t largest_stays;        /* the largest such tensor so far, bytes (a host read
                                     brings one whole to every rank)                      */
    int64_t released_bytes;       /* bytes of the tiles of released tensors
                                     (nnt_tensor.released; guarded by lock)               */
    int64_t release_window;       /* under release_weights, the most bytes of weights the
                                     model's forward or backward gathers at once (set by
                                     nnt_ctx_set_release_window), bytes                  */
    struct {
        int64_t params;           /* bytes of the parameter tiles placed on the rank
                                     (nnt_tensor_create_param)                            */
        int64_t stays;            /* bytes of the tiles of tensors that stay, it owns     */
        int64_t released;         /* bytes of the tiles of released tensors it owns       */
    } ranks[];                    /* per rank (one without MPI; guarded by lock)          */
};

/* Return the status of call if it failed (the message is already recorded). */
#define NNT_TRY(call)            \
    do {                         \
        int rc_ = (call);        \
        if (rc_)                 \
            return rc_;          \
    } while (0)

/* ---- errors and logging (lib/error.c, lib/log.c) ---------------------------------- */

/* Record msg as the last error of ctx (may be NULL) and of the calling thread, log it at
 * debug level, and return status (a negative NNT_E_* code). */
int nnt_fail(const nnt_ctx *ctx, int status, const char *fmt, ...) NNT_PRINTF(3, 4);
void nnt_log(int level, const char *fmt, ...) NNT_PRINTF(2, 3);
/* The size field of an option or result structure: NNT_E_INVAL (naming fn and what, and
 * saying how to set it) when the caller's have is smaller than the library's want,
 * NNT_E_UNSUPPORTED when larger (the program was built against a newer nnt). want_v02 (0:
 * none) is also accepted: the size of the structure in 0.2, before it grew, for programs
 * built against that release. */
int nnt_check_struct_size(const nnt_ctx *ctx, const char *fn, const char *what, size_t have,
                          size_t want, size_t want_v02, const char *how);
/* The same with the sizes of every older release the structure had (nolder of them, 0s
 * ignored), for a structure that grew more than once. */
int nnt_check_struct_sizes(const nnt_ctx *ctx, const char *fn, const char *what, size_t have,
                           size_t want, const size_t *older, size_t nolder, const char *how);
/* A frozen structure's reserved words (n of them, what: their name in messages): 0, or
 * NNT_E_UNSUPPORTED naming the first that is not (set by a program built against a newer
 * nnt, whose fields took that room). */
int nnt_check_reserved(const nnt_ctx *ctx, const char *fn, const char *what,
                       const uint64_t *reserved, size_t n);
/* out (size bytes) = the caller's options user, or defaults when user is NULL, after
 * checking user's size field (the first member of every option structure) as above; a
 * caller built against an older release whose structure was shorter (size_v02 bytes, the
 * size it had in 0.2; 0: none) gets the defaults for the fields added since. out's size
 * field is size either way. */
int nnt_read_options(const char *fn, const void *user, const void *defaults, void *out,
                     size_t size, size_t size_v02, const char *how);
/* The same with the sizes of every older release (nnt_check_struct_sizes). */
int nnt_read_options_sizes(const char *fn, const void *user, const void *defaults, void *out,
                           size_t size, const size_t *older, size_t nolder, const char *how);
/* RoPE options (NULL: the defaults) checked and copied into *o, errors naming fn
 * (lib/ops/rope.c; also the attention layer's, at creation). */
int nnt_rope_options_read(const char *fn, const nnt_rope_options *user, nnt_rope_options *o);
/* What transformers multiplies the cosines and sines by (YaRN's and LongRoPE's
 * attention_factor, or its default from factor; 1 for the other scalings and for NULL). */
double nnt_rope_attention_factor(const nnt_rope_options *o);
/* The rotated entries of a head vector of hd (partial_rotary_factor's; hd for NULL). */
int64_t nnt_rope_rotary_dim(const nnt_rope_options *o, int64_t hd);
/* NNT_E_INVAL naming fn unless o's rotary dimension of hd is even and >= 2 and a longrope's
 * factors are as many as its pairs. */
int nnt_rope_check_head(const char *fn, const nnt_rope_options *o, int64_t hd);
/* Gemma's elementwise operations (internal; the layers' options use them): GeGLU, the
 * SwiGLU operations with GELU's tanh form (transformers' gelu_pytorch_tanh) in place of
 * silu (lib/ops/swiglu.c), and soft-capping y = tanh(x / cap) cap, cap > 0, with its
 * gradient dx = dy (1 - tanh(x / cap)^2) (lib/ops/elementwise.c; y may be x, dx dy). */
int nnt_tensor_geglu(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *y);
int nnt_tensor_geglu_backward(nnt_tensor *gate, nnt_tensor *up, nnt_tensor *dy,
                              nnt_tensor *dgate, nnt_tensor *dup);
/* The gated activations of lib/ops/swiglu.c and its codelets: y = act(gate) up (SwiGLU,
 * GeGLU), or gpt-oss's clamped SwiGLU, gc = min(gate, limit), uc = clamp(up, -limit,
 * limit), y = gc sigmoid(alpha gc) (uc + 1); its gradient is 0 at and beyond the limits
 * (torch.clamp's). */
enum { NNT_GLU_SILU = 0, NNT_GLU_GELU_TANH = 1, NNT_GLU_SILU_CLAMP = 2 };
typedef struct nnt_glu_act {
    int kind;                    /* NNT_GLU_*                                            */
    float alpha, limit;          /* NNT_GLU_SILU_CLAMP: > 0 and finite; otherwise 0      */
} nnt_glu_act;
/* gpt-oss's values (transformers' GptOssConfig: swiglu_alpha, swiglu_limit) */
#define NNT_SWIGLU_CLAMP_ALPHA 1.702
#define NNT_SWIGLU_CLAMP_LIMIT 7.0
/* The operation of act (any kind; the clamped SwiGLU's alpha, limit > 0 and finite, else
 * NNT_E_INVAL) and its gradient (the MLP layers'); aliasing as nnt_tensor_swiglu's. */
int nnt_tensor_glu(const nnt_glu_act *act, nnt_tensor *gate, nnt_tensor *up, nnt_tensor *y);
int nnt_tensor_glu_backward(const nnt_glu_act *act, nnt_tensor *gate, nnt_tensor *up,
                            nnt_tensor *dy, nnt_tensor *dgate, nnt_tensor *dup);
int nnt_tensor_softcap(nnt_tensor *x, double cap, nnt_tensor *y);
int nnt_tensor_softcap_backward(nnt_tensor *x, double cap, nnt_tensor *dy, nnt_tensor *dx);
/* nnt_tensor_attention_kv_ex with the keys' row r at position k_pos0 + r (a cache that keeps
 * the last positions only): queries at past .., 0 <= k_pos0 <= past, past - k_pos0 + Tq <= Tk;
 * rows at positions after the last query are masked as any later key is. */
int nnt_tensor_attention_kv_from(nnt_tensor *q, nnt_tensor *k, nnt_tensor *v, int64_t past,
                                 int64_t k_pos0, const nnt_tensor_attention_options *opts,
                                 nnt_tensor *o);
void nnt_vlog(int level, const char *fmt, va_list ap);

/* A task body failed (it cannot return a status): log it and remember it, so that the next
 * nnt_ctx_wait() returns NNT_E_RUNTIME. */
void nnt_task_error(const char *codelet, const char *fmt, ...) NNT_PRINTF(2, 3);

/* ---- context (lib/ctx*.c) ----------------------------------------------------------- */

#ifdef NNT_CUDA_CODELETS
/* The calling CUDA worker's cuBLASLt handle and workspace (created at context start). */
int nnt_cuda_worker_lt(cublasLtHandle_t *handle, void **workspace, size_t *workspace_size);
/* The stream a CUDA codelet enqueues its work on (StarPU's local stream), with the CUDA
 * runtime's last-error slot cleared first: StarPU polls cudaEventQuery in this same thread
 * and leaves its "not ready" there (and a failed allocation's error), which the kernels'
 * launch checks (cudaGetLastError) would otherwise report as their own. Real faults are
 * sticky and still reported. Every CUDA codelet takes its stream from here. */
cudaStream_t nnt_cuda_task_stream(void);
#endif

/* Default per-GPU memory budget (when nnt_ctx_options.mem_gpu_mib is 0 and
 * STARPU_LIMIT_CUDA_MEM unset) for a card of total_mib: less a reserve of 1.5 GiB or 1/16 of
 * the card, whichever is more, for what StarPU does not count (the CUDA context, cuBLAS and
 * cuBLASLt workspaces, the GEMM operand scratch); half of a card smaller than two reserves. */
int64_t nnt_default_gpu_budget_mib(int64_t total_mib);

/* lib/topology.c: where hwloc's NUMA nodes count less main memory than the kernel (some
 * virtual machines) or than NNT_HOST_RAM_MIB, a copy of this machine's hwloc topology with
 * that memory in a new temporary file, its path in path (len bytes), for StarPU to start on
 * (HWLOC_XMLFILE); path "" when none is needed or it could not be written (logged). 0, or
 * NNT_E_INVAL for an NNT_HOST_RAM_MIB that is not a positive number. */
int nnt_topology_file(char *path, size_t len);
/* The machine's main memory in bytes: NNT_HOST_RAM_MIB when it is a number, else the
 * kernel's MemTotal (0 when unknown). */
int64_t nnt_host_ram_bytes(void);
/* The memory available for new allocations now (the kernel's MemAvailable, else its free
 * pages), at most nnt_host_ram_bytes; 0 when unknown. */
int64_t nnt_host_available_bytes(void);

/* Scratch memory of the calling worker, at least bytes, in the worker's memory (RAM for a
 * CPU worker, GPU memory for a CUDA worker, there allocated on the worker's stream). Kept
 * and reused by the worker's later tasks, so contents do not survive a task; NULL when out
 * of memory or not called from a worker. Freed when the context stops.                   */
void *nnt_worker_scratch(size_t bytes);
/* The calling CPU worker's oneDNN primitives (nnt_cpu_gemm_dnnl, nnt_cpu_product_f32) when
 * oneDNN is the CPU GEMM backend, created at its first use; NULL under BLIS, when not called
 * from a worker, or when oneDNN is unusable. Freed when the context stops. */
struct nnt_dnnl_cache *nnt_worker_product_cache(void);

/* 0 if ctx is the live context, else a failure (recorded) naming the function. */
int nnt_ctx_check(const nnt_ctx *ctx, const char *func);
/* Add t to the context's tensors, or fail with NNT_E_NOMEM (recorded, naming fn) when its
 * tiles would not fit in the memory StarPU may use: the RAM budget without swap, the swap
 * with one (StarPU keeps a disk copy of every evicted tile). Without a budget: no limit.
 * A deferred tensor (nnt_tensor.deferred) is added uncounted. */
int nnt_ctx_add_tensor(nnt_ctx *ctx, nnt_tensor *t, const char *fn);
/* Count a deferred tensor's tiles now, before its first write, with add's check and
 * failure; 0 at once for a tensor counted already. */
int nnt_ctx_count_deferred(nnt_ctx *ctx, nnt_tensor *t, const char *fn);
/* Whether some live tensor is still deferred (then nnt_ctx_count_deferred has work). */
int nnt_ctx_has_deferred(nnt_ctx *ctx);
/* The bytes of RAM the budget leaves to what lives outside the tiles (the kept packs of
 * lib/ops/gemm.c): the budget less the tiles counted and those deferred; INT64_MAX without
 * a budget or with a swap (tiles beyond RAM go to disk). */
int64_t nnt_ctx_ram_room(nnt_ctx *ctx);
void nnt_ctx_remove_tensor(nnt_ctx *ctx, nnt_tensor *t);
/* Under release_weights: the most bytes of weights (and their bf16 copies) a forward or
 * backward gathers at once, for the budget check (nnt_ctx_add_tensor counts each rank's own
 * share of the released tensors, and this once). Fails with NNT_E_NOMEM (recorded, naming
 * fn) when a larger window does not fit; then the window is left as it was. */
int nnt_ctx_set_release_window(nnt_ctx *ctx, int64_t bytes, const char *fn);

/* ---- several processes (lib/mpi/mpi.c; no-ops or failures without NNT_HAVE_MPI) ------ */

/* Rank owning tile `tile` of t, the tensor_seq-th tensor of its context (0 without MPI):
 * cyclic over tiles, or with a placement hint (t->rows) by blocks of the tiles'
 * coordinates along the hinted dimensions. */
int nnt_tile_owner(const nnt_tensor *t, int64_t tensor_seq, int64_t tile);
/* Under MPI (collective, in submission order): h's tile moves to rank, which owns it from
 * then on (the tasks that write it run there) until the next migration; keep 0: its value
 * is not sent (the next task overwrites it; it may hold no data, e.g. a dropped gradient). */
void nnt_mpi_migrate(nnt_ctx *ctx, starpu_data_handle_t h, int rank, int keep);
/* nnt_ctx_create with mpi = 1, before StarPU starts: start MPI (once per process), set
 * rank and size, and agree across ranks (collective): local_rc is this rank's own option
 * check; NNT_E_INVAL on every rank when another failed or the options differ. *ram_mib:
 * this rank's main memory in, the smallest rank's out. *node_ranks: the ranks on this
 * rank's node (those that share its memory), this one included. */
int nnt_mpi_agree(const nnt_ctx_options *o, int local_rc, int *rank, int *nranks,
                  int64_t *ram_mib, int *node_ranks);
/* starpu_mpi_init_conf / starpu_mpi_shutdown on MPI_COMM_WORLD; the wait for this rank's
 * tasks (nnt_ctx_wait, nnt_ctx_destroy). */
int nnt_mpi_init_runtime(struct starpu_conf *conf);
void nnt_mpi_shutdown_runtime(void);
int nnt_mpi_wait_all(void);
/* Give h (a tile or a partial result) the context's next tag and its owner rank. */
void nnt_mpi_register(nnt_ctx *ctx, starpu_data_handle_t h, int owner);
/* Collective, before every rank reads h on the host: the owner sends h to every other rank
 * (detached; a later acquire of h waits for it). */
void nnt_mpi_share(nnt_ctx *ctx, starpu_data_handle_t h, int owner);
/* Collective, before the owner writes h on the host: other ranks drop their copies. */
void nnt_mpi_forget_copies(nnt_ctx *ctx, starpu_data_handle_t h);
/* Rank `to` receives a copy of h from its owner and waits for it (blocking there); the
 * owner sends it once the tasks writing it are done (detached); other ranks do nothing. */
void nnt_mpi_receive_wait(nnt_ctx *ctx, starpu_data_handle_t h, int to);
/* Collective: rank 0 receives every rank's buffer (mine, len >= 1 bytes), in rank order,
 * through StarPU-MPI. On rank 0 *all is a malloc'ed copy of them all, rank r's at
 * offsets[r] (offsets has nranks + 1 entries, the last the total); elsewhere *all is NULL.
 * Every rank takes part even when it fails (NNT_E_NOMEM on rank 0 for the copy: the
 * transfers still complete, into memory StarPU allocates and frees). */
int nnt_mpi_gather(nnt_ctx *ctx, const void *mine, int64_t len, char **all, int64_t *offsets);
/* Collective: values[0..n) replaced on every rank by their maximum over the ranks (a
 * gather to rank 0, then a broadcast, through StarPU-MPI; safe beside its thread). */
int nnt_mpi_max(nnt_ctx *ctx, int64_t *values, int n);
/* Collective, at the end of a save that every rank takes part in (rank 0 writes the file):
 * rc, or NNT_E_IO on a rank whose own part succeeded when another rank's failed. No rank
 * returns before rank 0's file is in place: a rank that exits at once with a non-zero
 * status (a signal's) makes mpirun end the job, rank 0's write with it. rc as is without
 * MPI. */
int nnt_mpi_saved(nnt_ctx *ctx, int rc, const char *fn, const char *path);
/* nnt_submit under MPI (owner computes); args is a malloc'ed copy the task frees. Returns
 * StarPU-MPI's status; *submit_rc the local starpu_task_submit's (0 where not run here). */
int nnt_mpi_submit(nnt_ctx *ctx, struct starpu_codelet *cl, int nbuf,
                   const struct starpu_data_descr *bufs, void *args, size_t args_size,
                   int *submit_rc);

/* ---- tensors (lib/tensor.c) --------------------------------------------------------- */

/* nnt_tensor_create with a placement hint (nnt_tensor.rows: bit d for a batch or
 * sequence dimension d of an activation; 0 as nnt_tensor_create). */
int nnt_tensor_create_placed(nnt_ctx *ctx, nnt_dtype dtype, int ndim, const int64_t *shape,
                             const int64_t *tile, unsigned rows, nnt_tensor **out);
/* A layer's parameter: under NNT_DIST_SHARDED and _DATA each tile goes to the rank with
 * the fewest bytes of parameter tiles so far (ties: the cyclic rank), so that every rank
 * holds about 1/N of the parameters, and of the gradients and moments created beside
 * them, whatever the sizes of a model's single-tile parameters. deferred: not counted in
 * the budget until its first write (nnt_tensor_count_first_write), for a model built
 * unwritten whose frozen matrices will be held in bf16. */
int nnt_tensor_create_param(nnt_ctx *ctx, int ndim, const int64_t *shape, const int64_t *tile,
                            int deferred, nnt_tensor **out);
/* Who holds the tiles of a tensor under MPI, for the RAM budget (nnt_tensor_create_beside). */
enum {
    NNT_HELD_ANYWHERE = 0,   /* any rank may keep a copy of any tile it reads                */
    NNT_HELD_STAYS = 1,      /* no other rank reads its tiles in a task (nnt_tensor.stays)   */
    NNT_HELD_RELEASED = 2,   /* read elsewhere, released after each use (nnt_tensor.released) */
    NNT_HELD_DEFERRED = 4    /* or'ed in: not counted in the budget until
                                nnt_ctx_count_deferred (nnt_tensor.deferred)                 */
};
/* nnt_tensor_create with the placement of beside (which has the same shape and tiling):
 * each tile on the rank of beside's, so that a gradient or an optimizer moment is where its
 * parameter is (the optimizer's tasks read and write them together), a weight's bf16 copy
 * where the weight is (converted there; the copy travels). held: an NNT_HELD_* value. */
int nnt_tensor_create_beside(nnt_ctx *ctx, nnt_dtype dtype, int ndim, const int64_t *shape,
                             const int64_t *tile, const nnt_tensor *beside, int held,
                             nnt_tensor **out);
/* The hint a tensor of ndim dimensions keeps of rows (the bits of its dimensions). */
static inline unsigned nnt_rows_hint(unsigned rows, int ndim)
{
    return rows & ((1u << ndim) - 1u);
}
/* The hint of an activation (B, T, ...) created by the layers: dimensions 0 and 1. */
#define NNT_ROWS_BT 3u
/* ... and of one laid out (B, heads, T, ...): dimensions 0 and 2. */
#define NNT_ROWS_BHT 5u
/* 0 if t is a usable tensor (its context alive), else a recorded failure. */
int nnt_tensor_check(const nnt_tensor *t, const char *func);
/* nnt_tensor_check, plus: the tensor has been written (filled, copied into, computed). */
int nnt_tensor_check_readable(const nnt_tensor *t, const char *func);
/* Before the first write of a deferred tensor (nnt_tensor.deferred): count its tiles in the
 * budget, or refuse (NNT_E_NOMEM, naming func) as its creation would have. The host copies,
 * fills, nnt_tensor_copy/permute and nnt_tensor_convert call it on what they write; layers
 * call it (count_grads) on the gradients before a backward. 0 at once for another tensor. */
int nnt_tensor_count_first_write(nnt_tensor *t, const char *func);
/* Hint that t's tiles will not be used soon (starpu_data_wont_use on each): under a memory
 * budget StarPU evicts them first. Only a hint: results do not change. NULL is accepted. */
void nnt_tensor_wont_use(nnt_tensor *t);
/* Block until the tasks submitted so far that write t are done (no transfer: the tiles are
 * not fetched anywhere; under MPI, this rank's tiles). NNT_E_RUNTIME if StarPU refuses. */
int nnt_tensor_wait_written(nnt_tensor *t);
/* nnt_tensor_wait_written on every rank, collective: under MPI a rank that owns no tile of
 * t (it sees none written) receives t's first tile from its owner and waits for it, then
 * every rank drops the copies of that tile. */
int nnt_tensor_wait_computed(nnt_tensor *t);
/* Under MPI: every rank but each tile's owner drops the copy it received of the tile
 * (starpu_mpi_cache_flush, after the work already submitted on it); the next task that
 * reads it there receives it again. Collective. NULL is accepted. */
void nnt_tensor_forget_copies(nnt_tensor *t);
/* Drop t's contents (starpu_data_invalidate_submit on each tile, after the work already
 * submitted on it): no copy is kept or written back anywhere, and t is unreadable
 * (NNT_E_STATE) until written again, whose first write of each tile must not read it. */
void nnt_tensor_invalidate(nnt_tensor *t);
/* t's values converted to dtype (NNT_FP32 <-> NNT_BF16: rounded to nearest even, or widened
 * exactly) in place: the same nnt_tensor (every pointer to it stays valid), new tiles of its
 * shape and tiling where its old ones are, the old ones released after the conversion (no
 * wait). A frozen matrix's storage (nnt_layer_param_narrow). Collective under MPI. */
int nnt_tensor_retype(nnt_tensor *t, nnt_dtype dtype);
/* nnt_tensor_copy_to_host / _from_host through floats whatever t's dtype (NNT_FP32, or
 * NNT_BF16: widened exactly on the way out, rounded to nearest even on the way in): buf
 * holds n = numel(t) floats. How the model files read and write parameters, some of which
 * may be stored in bf16. */
int nnt_tensor_to_host_f32(nnt_tensor *t, float *buf, int64_t n);
int nnt_tensor_from_host_f32(nnt_tensor *t, const float *buf, int64_t n);
/* Element size of a dtype, 0 for unknown or unsupported (and for NNT_NF4, whose elements
 * take half a byte plus their block's absmax: nnt_dtype_bytes). */
size_t nnt_dtype_size(nnt_dtype dtype);
/* How an NNT_NF4 tensor of this shape and tiling holds whole blocks: a tile's elements are
 * runs of *run consecutive elements of the tensor (its innermost dims it covers whole, times
 * its extent along the one it cuts); the index of that dim (0 if none, a single tile), or -1
 * when a run or a row of that dim is no whole number of blocks. */
int nnt_nf4_view(int ndim, const int64_t *shape, const int64_t *tile, int64_t *run);
/* Bytes of numel elements of a dtype: numel / 2 + 4 numel / 64 for NNT_NF4 (numel a
 * multiple of 64: its codes, then its blocks' absmax). */
int64_t nnt_dtype_bytes(nnt_dtype dtype, int64_t numel);
/* Tile at grid multi-index coord; its shape and origin (element offset per dimension). */
void nnt_tensor_tile_coord(const nnt_tensor *t, int64_t linear, int64_t *coord);
void nnt_tensor_tile_box(const nnt_tensor *t, const int64_t *coord, int64_t *origin,
                         int64_t *shape);

/* ---- codelets (lib/codelets/) -------------------------------------------------------- *
 * A codelet file defines its starpu_codelet(s) with .nbuffers = STARPU_VARIABLE_NBUFFERS,
 * a history-based perf model, CPU functions calling cpu/ kernels and, under
 * NNT_CUDA_CODELETS, CUDA functions calling cuda/ kernels on starpu_cuda_get_local_stream()
 * (flag STARPU_CUDA_ASYNC). Its nnt_insert_X() packs the tile sizes into an argument block
 * and calls nnt_submit(). Task bodies report failures with nnt_task_error().            */

/* A codelet buffer (a tile: StarPU vector) as elements and as floats. */
static inline int64_t nnt_tile_numel(void *buffer)
{
    return (int64_t)STARPU_VECTOR_GET_NX(buffer);
}
static inline float *nnt_tile_f32(void *buffer)
{
    return (float *)STARPU_VECTOR_GET_PTR(buffer);
}

/* The StarPU priority of a task on bufs submitted now (ctx->task_prio; nnt_submit). */
int nnt_task_priority(const nnt_ctx *ctx, int nbuf, const struct starpu_data_descr *bufs);
/* Submit a task of cl on nbuf (handle, mode) pairs (any number: StarPU's dynamic handles
 * beyond STARPU_NMAXBUFS) with a copy of args; maps StarPU's errors to NNT_E_*. */
int nnt_submit(nnt_ctx *ctx, struct starpu_codelet *cl, int nbuf,
               const struct starpu_data_descr *bufs, const void *args, size_t args_size);

/* NNT_DEBUG_TASKS / NNT_DEBUG_JITTER (lib/codelets/debug.c): whether tasks are checked;
 * wrap a built task into its checked twin (0; -1 out of memory; 0 at once when off); the
 * faults found so far. */
int nnt_debug_tasks_on(void);
int nnt_debug_task_wrap(struct starpu_task *task);
unsigned long nnt_debug_tasks_faults(void);

/* Add handle h with mode to bufs (*n entries so far) unless it is there already, in which
 * case the modes are merged (read + write = RW); returns the handle's slot. For tasks that
 * accept one tile in several roles (in place). */
static inline int nnt_buffer_slot(struct starpu_data_descr *bufs, int *n, starpu_data_handle_t h,
                                  enum starpu_data_access_mode mode)
{
    for (int i = 0; i < *n; i++) {
        if (bufs[i].handle == h) {
            bufs[i].mode = (enum starpu_data_access_mode)(bufs[i].mode | mode);
            return i;
        }
    }
    bufs[*n].handle = h;
    bufs[*n].mode = mode;
    return (*n)++;
}

int nnt_insert_fill(nnt_tensor *t, starpu_data_handle_t h, double value);

/* One strided box of a copy task (lib/codelets/copy.c): shape in destination dimension
 * order, element strides and offsets in the source tile (buffer 1 + src) and in the
 * destination tile. */
typedef struct nnt_copy_box {
    int64_t shape[NNT_MAX_DIMS];
    int64_t src_stride[NNT_MAX_DIMS];
    int64_t dst_stride[NNT_MAX_DIMS];
    int64_t src_offset, dst_offset;
    int src;
} nnt_copy_box;
int nnt_insert_copy(nnt_ctx *ctx, starpu_data_handle_t dst, enum starpu_data_access_mode mode,
                    int nsrc, const starpu_data_handle_t *src, int ndim, size_t elsize,
                    int nbox, const nnt_copy_box *boxes);
int nnt_insert_fill_random(nnt_tensor *t, starpu_data_handle_t h, const int64_t *origin,
                           const int64_t *tile_shape, uint64_t seed, int dist, float a,
                           float b);

/* count (an int32 tile of 1) = how many of float tile src's values bf16 cannot hold (CPU) */
int nnt_insert_bf16_inexact(nnt_ctx *ctx, starpu_data_handle_t src, starpu_data_handle_t count);
/* lib/codelets/convert.c: src tile of dtype from into dst tile of dtype to, n elements each:
 * NNT_FP32 <-> NNT_BF16, or NNT_FP32 / NNT_BF16 <-> NNT_NF4 (quantized or dequantized, on a
 * CPU worker; not before the writer of handle after, when not NULL) */
int nnt_insert_convert(nnt_ctx *ctx, nnt_dtype from, nnt_dtype to, int64_t n,
                       starpu_data_handle_t src, starpu_data_handle_t dst,
                       starpu_data_handle_t after);
/* lib/ops/copy.c: nnt_tensor_convert whose tasks run after the writer of handle after (NULL:
 * none): a product's dequantized B made when its A is, not as soon as B is ready */
int nnt_tensor_convert_after(nnt_tensor *src, nnt_tensor *dst, starpu_data_handle_t after);

/* lib/ops/elementwise.c: z = alpha x + beta y, x and y read (both written before), z
 * written; three tensors of equal shapes and tilings. nnt_tensor_sum_into: sum = a + b (three
 * tensors) in a's layout, b in any tiling: one pass when b's tiling is a's, else b copied
 * into sum first; the same bits either way. */
int nnt_tensor_axpbyz(double alpha, nnt_tensor *x, double beta, nnt_tensor *y, nnt_tensor *z);
int nnt_tensor_sum_into(nnt_tensor *a, nnt_tensor *b, nnt_tensor *sum);
/* lib/ops/reduce.c, per-feature products (DoRA's magnitude); FP32 unless said. A feature
 * vector h (n...) has the shape and tiling of the trailing dims of x (m..., n...), or with
 * by_row of its leading dims (x (n..., k...)).
 * mul_broadcast: z = x (h + c) (beta 0) or z += x (h + c) (beta 1); z x's layout, or x.
 * dot_trailing:  acc (m...) = beta acc + sums of x y over the trailing dims (x, y FP32 or
 *                BF16, the same layout; or x == y NF4: the squares of its dequantization).
 * dot_leading:   acc (n...) = beta acc + (h, or 1 when NULL) times the sums of x y over the
 *                leading dims (h acc's layout).
 * rsqrt_mul:     out = (m, or 1 when NULL) / sqrt(n2), all one layout. */
int nnt_tensor_mul_broadcast(nnt_tensor *x, nnt_tensor *h, double c, int by_row, double beta,
                             nnt_tensor *z);
int nnt_tensor_dot_trailing(nnt_tensor *x, nnt_tensor *y, double beta, nnt_tensor *acc);
int nnt_tensor_dot_leading(nnt_tensor *x, nnt_tensor *y, nnt_tensor *h, double beta,
                           nnt_tensor *acc);
int nnt_tensor_rsqrt_mul(nnt_tensor *m, nnt_tensor *n2, nnt_tensor *out);

/* lib/codelets/elementwise.c */
int nnt_insert_scale(nnt_ctx *ctx, starpu_data_handle_t x, float alpha);
int nnt_insert_axpby(nnt_ctx *ctx, float alpha, starpu_data_handle_t x, float beta,
                     starpu_data_handle_t y);
int nnt_insert_axpbyz(nnt_ctx *ctx, float alpha, starpu_data_handle_t x, float beta,
                      starpu_data_handle_t y, starpu_data_handle_t z);
/* exact: the exact GELU x Phi(x) (nnt_tensor_gelu_erf), else the tanh approximation */
int nnt_insert_gelu(nnt_ctx *ctx, int exact, starpu_data_handle_t x, starpu_data_handle_t y);
int nnt_insert_gelu_bwd(nnt_ctx *ctx, int exact, starpu_data_handle_t x,
                        starpu_data_handle_t dy, starpu_data_handle_t dx);
int nnt_insert_softcap(nnt_ctx *ctx, float cap, starpu_data_handle_t x, starpu_data_handle_t y);
int nnt_insert_softcap_bwd(nnt_ctx *ctx, float cap, starpu_data_handle_t x,
                           starpu_data_handle_t dy, starpu_data_handle_t dx);

/* lib/codelets/reduce.c */
int nnt_insert_add_bcast(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t y);
int nnt_insert_sum_outer(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t y,
                         int first, float beta);
int nnt_insert_sumsq(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t acc);
int nnt_insert_mul_bcast(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t h, float c,
                         int by_row, int accumulate, starpu_data_handle_t z);
int nnt_insert_dot_cols(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t y,
                        starpu_data_handle_t h, starpu_data_handle_t acc, int first, float beta);
int nnt_insert_dot_rows(nnt_ctx *ctx, int bf16, starpu_data_handle_t x, starpu_data_handle_t y,
                        starpu_data_handle_t acc, int first, float beta);
int nnt_insert_dot_rows_nf4(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t acc,
                            int first, float beta);
int nnt_insert_rsqrt_mul(nnt_ctx *ctx, starpu_data_handle_t m, starpu_data_handle_t n2,
                         starpu_data_handle_t out);
/* lib/ops/reduce.c, the two halves of nnt_tensors_sumsq: submit the sum of squares of each
 * tile of x into partial[*count], partial[*count + 1], ... (registered here; the caller
 * unregisters them, also after a failure: *count says how many), then wait for count
 * partials and add them in order in double, the same sum on every rank. */
int nnt_sumsq_submit(nnt_tensor *x, starpu_data_handle_t *partial, int *owner, int64_t *count);
int nnt_sumsq_gather(nnt_ctx *ctx, int64_t count, starpu_data_handle_t *partial,
                     const int *owner, double *sum);

/* lib/codelets/optim.c */
int nnt_insert_adam_step(nnt_ctx *ctx, int decoupled, float lr, float beta1, float beta2,
                         float eps, float weight_decay, float bc1, float bc2, float grad_scale,
                         starpu_data_handle_t p, starpu_data_handle_t g, starpu_data_handle_t m,
                         starpu_data_handle_t v, starpu_data_handle_t p16);
int nnt_insert_sgd_step(nnt_ctx *ctx, float lr, float momentum, float weight_decay,
                        float grad_scale, int first_step, starpu_data_handle_t p,
                        starpu_data_handle_t g, starpu_data_handle_t buf);

/* log(1 + exp(x)) without overflow (the losses of preference pairs: DPO, reward models) */
static inline double nnt_softplus(double x)
{
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

/* A reward model: one label, trained on pairs (not a one-label regression) */
static inline int nnt_model_is_reward(const nnt_model_config *c)
{
    return c->num_labels == 1 && c->problem_type == NNT_PROBLEM_DEFAULT;
}

/* lib/models/transformer.c: of a classifier's (num_labels >= 2) last forward with targets,
 * the targets that count and those its largest logit gets right (validation accuracy). */
int nnt_model_label_hits(nnt_layer *model, int64_t *hits, int64_t *counted);

/* lib/codelets/gemm.c: mnkb = {m, n, k, batch} of the tiles; tiles = {A, B, C, bias or NULL,
 * aux or NULL}; c_mode is C's access mode; the epilogue runs after the product in this task.
 * The product's operands have ctx's precision (ctx->precision when submitted). packed: NULL,
 * or tiles[1] is a B tile packed by nnt_insert_gemm_pack with *packed (then the task runs on
 * a CPU worker, batch 1).                                                                  */
typedef struct nnt_gemm_packing nnt_gemm_packing;
/* The GELU epilogues of either form: BIAS_GELU* write aux (gelu(C)), DGELU* read it. */
static inline int nnt_epilogue_writes_aux(int e)
{
    return e == NNT_EPILOGUE_BIAS_GELU || e == NNT_EPILOGUE_BIAS_GELU_ERF;
}
static inline int nnt_epilogue_reads_aux(int e)
{
    return e == NNT_EPILOGUE_DGELU || e == NNT_EPILOGUE_DGELU_ERF;
}
int nnt_insert_gemm(nnt_ctx *ctx, int trans_a, int trans_b, const int64_t *mnkb, float alpha,
                    float beta, enum starpu_data_access_mode c_mode, int epilogue,
                    const starpu_data_handle_t *tiles, const nnt_gemm_packing *packed);
/* lib/ops/gemm.c: 1 when the products of ctx pack B tiles that several row tiles share
 * (oneDNN computes them, its matmul wants a blocked B on this CPU, NNT_GEMM_PACK is not 0,
 * and only CPU workers of one process read RAM: no CUDA worker, whose products could not
 * read oneDNN's layout; no MPI, whose transfers know no temporary handle; no disk swap, to
 * which a temporary handle cannot be evicted); else 0 and why not (static string). */
int nnt_gemm_packs(const nnt_ctx *ctx, const char **why);
/* lib/ops/gemm.c: 1 when the bf16 products of ctx sum several k tiles of a C tile in one
 * task (nnt_insert_gemm_ksum): oneDNN computes them with bf16 dot products, NNT_GEMM_KSUM is
 * not 0, only CPU workers (the task has no CUDA implementation); else 0 and why not (static
 * string). Over MPI such a task runs on C's owner with the rows brought to it (under
 * NNT_DIST_DATA too, where other products' C tiles may travel to the rows), so that every
 * rank computes one process's sums. */
int nnt_gemm_sums_k(const nnt_ctx *ctx, const char **why);
/* C tiles along m (readers of each B tile) from which a product packs its B tiles: into
 * packs kept with B (ctx->pack_keep), or made for this product alone. */
#define NNT_GEMM_PACK_MIN_READERS 3
#define NNT_GEMM_KEEP_MIN_READERS 2
/* lib/ops/gemm.c: whether ctx keeps B's packs between products (pack_b, no RAM budget given:
 * the packs stay in RAM beside B until B changes or is destroyed; NNT_GEMM_PACK=temp packs
 * for each product alone); the packs kept with t, released (nnt_tensor_destroy). */
int nnt_gemm_packs_kept(const nnt_ctx *ctx);
void nnt_gemm_kept_free(nnt_tensor *t);
/* The same without waiting (nnt_temp_release, and nnt_tensor_retype, whose new tiles' write
 * counts start again): each pack is unregistered, and its RAM pooled, once the tasks
 * submitted on it have run. nnt_gemm_kept_live: the kept packs registered now
 * (tests: that released tensors leave none behind). */
void nnt_gemm_kept_retire(nnt_tensor *t);
unsigned long nnt_gemm_kept_live(void);
/* The RAM of kept packs (in use and pooled) now and at most since the context started
 * (outside StarPU's memory nodes), and the cap on what they may hold in use
 * (ctx->pack_keep_max: an eighth of the RAM available when the context started, or
 * NNT_GEMM_PACK_KEEP_MIB): beyond it, B tiles are not packed to be kept (read as stored). */
void nnt_gemm_kept_bytes(int64_t *now, int64_t *peak);
/* After tiles were counted: the pool of kept packs' RAM emptied, then the packs of tensors
 * freed, until what they hold fits the room the RAM budget leaves (nnt_ctx_ram_room; the
 * packs took what was left when they were made). */
void nnt_gemm_kept_fit_room(nnt_ctx *ctx);
/* ctx->pack_keep_max from the environment and the RAM available now; the peak reset */
void nnt_gemm_kept_start(nnt_ctx *ctx);
/* The RAM of the packs of destroyed tensors, kept for new packs of the same sizes
 * (recomputed activations are made anew every step), freed when a context goes. */
void nnt_gemm_kept_drain(void);
/* Every write of a tile's handle (a task that writes it, a host copy into it) bumps its
 * version, so that what was derived from the tile (a packed copy) knows when it is stale:
 * nnt_submit and the host copies call nnt_handle_written. The handle's StarPU user data
 * holds the version, and in its two top bits what the tile holds (nnt_handle_mark_kind,
 * from the tensor's kind): a gradient's tile (for nnt_submit's priorities), or a weight's or
 * an optimizer state's (host side: with NNT_OPTIM_ON=cpu, the tasks that write them run on
 * CPU workers, nnt_task_writes_host_side). */
#define NNT_HANDLE_GRADIENT ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1))
#define NNT_HANDLE_HOST_SIDE ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 2))
#define NNT_HANDLE_MARKS (NNT_HANDLE_GRADIENT | NNT_HANDLE_HOST_SIDE)
static inline uint64_t nnt_handle_version(starpu_data_handle_t h)
{
    return (uint64_t)((uintptr_t)starpu_data_get_user_data(h) & ~NNT_HANDLE_MARKS);
}
static inline void nnt_handle_written(starpu_data_handle_t h)
{
    starpu_data_set_user_data(h, (void *)((uintptr_t)starpu_data_get_user_data(h) + 1));
}
static inline int nnt_handle_is_gradient(starpu_data_handle_t h)
{
    return ((uintptr_t)starpu_data_get_user_data(h) & NNT_HANDLE_GRADIENT) != 0;
}
static inline int nnt_handle_is_host_side(starpu_data_handle_t h)
{
    return ((uintptr_t)starpu_data_get_user_data(h) & NNT_HANDLE_HOST_SIDE) != 0;
}
/* The sum of t's tiles' write counts: it changes whenever a task or a host copy writes t
 * (what is derived from t's values is current while it is the same, with the same tiles). */
static inline uint64_t nnt_tensor_writes(const nnt_tensor *t)
{
    uint64_t v = 0;
    for (int64_t i = 0; i < t->ntiles; i++)
        v += nnt_handle_version(t->tiles[i].handle);
    return v;
}
/* kind: an enum nnt_mem_kind */
static inline void nnt_handle_mark_kind(starpu_data_handle_t h, int kind)
{
    uintptr_t v = (uintptr_t)starpu_data_get_user_data(h) & ~NNT_HANDLE_MARKS;
    if (kind == NNT_MEM_GRADIENTS)
        v |= NNT_HANDLE_GRADIENT;
    else if (kind == NNT_MEM_WEIGHTS || kind == NNT_MEM_OPTIM_STATE)
        v |= NNT_HANDLE_HOST_SIDE;
    starpu_data_set_user_data(h, (void *)v);
}
/* Whether a task with these buffers writes a host-side tile and ctx sends such tasks to its
 * CPU workers (NNT_OPTIM_ON=cpu, lib/ctx.c): nnt_submit then restricts it to them when CUDA
 * workers exist. */
int nnt_task_writes_host_side(const nnt_ctx *ctx, int nbuf,
                              const struct starpu_data_descr *bufs);
/* B tiles packed once for the products that share them (oneDNN's blocked layout, so that
 * each product skips its own reorder of B; nnt_cpu_dnnl_pack): the products' dtype and
 * rounding, exactly those the unpacked codelet would use, and the row count the layout is
 * chosen for. nnt_gemm_packing_of: that for the products of ctx's precision on an A and a B
 * of these dtypes (a context that packs: oneDNN is its backend), m rows each.
 * nnt_gemm_pack_bytes: the size of a packed B tile (k, n), 0 when the matmul takes it as
 * stored (nothing to pack). nnt_insert_gemm_pack: the task packing B tile b (k, n), or
 * (n, k) when trans_b, into `packed` (a handle of that size; CPU workers only).          */
struct nnt_gemm_packing {
    int bf16;      /* bf16 products (else float products)                               */
    int bits;      /* float products: mantissa bits a float operand is rounded to (0 all) */
    int64_t m;     /* rows of the products the layout is chosen for                     */
    int trans_b;   /* the products read B^T (B stored (n, k))                           */
};
void nnt_gemm_packing_of(const nnt_ctx *ctx, int a_bf16, int b_bf16, int trans_b, int64_t m,
                         nnt_gemm_packing *p);
size_t nnt_gemm_pack_bytes(const nnt_gemm_packing *p, int64_t n, int64_t k);
int nnt_insert_gemm_pack(nnt_ctx *ctx, const nnt_gemm_packing *p, int trans_b, int64_t n,
                         int64_t k, starpu_data_handle_t b, starpu_data_handle_t packed);

/* A product whose C tile sums several k tiles of bf16 products, in one task instead of one
 * per k tile (lib/codelets/gemm.c): the task joins the tiles along k as it rounds them to
 * bf16 (float tiles) or copies them (bf16 tiles) and multiplies once, so C (typically a
 * weight gradient summed over row tiles) is read and written once. nnt_gemm_ksum_applies:
 * whether ctx's products may be summed so (ctx->ksum, bf16 precision, oneDNN's bf16 products
 * on the CPU workers). nnt_insert_gemm_ksum: a[i], b[i] the k tiles (k[i] each, at most
 * NNT_GEMM_KSUM_MAX), C (m, n) = alpha sum_i op(a[i]) op(b[i]) + beta C, one matrix; CPU
 * workers only. */
#define NNT_GEMM_KSUM_MAX 8
int nnt_gemm_ksum_applies(const nnt_ctx *ctx);
int nnt_insert_gemm_ksum(nnt_ctx *ctx, int trans_a, int trans_b, int64_t m, int64_t n, int nk,
                         const int64_t *k, float alpha, float beta,
                         const starpu_data_handle_t *a, const starpu_data_handle_t *b,
                         starpu_data_handle_t c);

/* lib/codelets/layernorm.c */
int nnt_insert_layernorm_fwd(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t gamma,
                             starpu_data_handle_t beta, float eps, starpu_data_handle_t y,
                             starpu_data_handle_t mean, starpu_data_handle_t rstd);
int nnt_insert_layernorm_bwd(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t dy,
                             starpu_data_handle_t gamma, starpu_data_handle_t mean,
                             starpu_data_handle_t rstd, starpu_data_handle_t dx,
                             starpu_data_handle_t dgamma, starpu_data_handle_t dbeta);

/* lib/codelets/rmsnorm.c */
int nnt_insert_rmsnorm_fwd(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t gamma,
                           float eps, starpu_data_handle_t y, starpu_data_handle_t rstd);
int nnt_insert_rmsnorm_bwd(nnt_ctx *ctx, starpu_data_handle_t x, starpu_data_handle_t dy,
                           starpu_data_handle_t gamma, starpu_data_handle_t rstd,
                           starpu_data_handle_t dx, starpu_data_handle_t dgamma);

/* lib/codelets/swiglu.c: outputs may be inputs (one handle, RW); dgate != dup; act (copied):
 * which gated activation (nnt_glu_act) */
int nnt_insert_swiglu(nnt_ctx *ctx, const nnt_glu_act *act, starpu_data_handle_t gate,
                      starpu_data_handle_t up, starpu_data_handle_t y);
int nnt_insert_swiglu_bwd(nnt_ctx *ctx, const nnt_glu_act *act, starpu_data_handle_t gate,
                          starpu_data_handle_t up, starpu_data_handle_t dy,
                          starpu_data_handle_t dgate, starpu_data_handle_t dup);

/* lib/codelets/rope.c: one task on nbh slabs of nt rows (positions pos0, pos0 + 1, ...) of
 * n pairs; rows of ld floats. whole: the tile holds whole head vectors (x_hi == x_lo,
 * y_hi == y_lo, the hi half at offset n, ld = hd >= 2n); else lo and hi are two tiles
 * (ld = n).
 * inv_freq: the n frequencies of the task's pairs. y may be x (in place). */
typedef struct nnt_rope_task {
    int64_t nbh, nt, n, pos0, ld;
    int sign;    /* +1: rotate by +angle (forward), -1: by -angle (backward) */
    float scale; /* the cosines' and sines' factor (the attention factor; 1: none) */
    int whole;
    int64_t nb, nh;   /* with positions: the tile's batch rows and heads (nbh = nb nh)   */
} nnt_rope_task;
int nnt_insert_rope(nnt_ctx *ctx, const nnt_rope_task *t, const float *inv_freq,
                    starpu_data_handle_t x_lo, starpu_data_handle_t x_hi,
                    starpu_data_handle_t y_lo, starpu_data_handle_t y_hi);
/* nnt_insert_rope with the positions of the rows from pos, the (t->nb, t->nt) int32 tile of
 * the tokens' positions (pos0 unused). */
int nnt_insert_rope_pos(nnt_ctx *ctx, const nnt_rope_task *t, const float *inv_freq,
                        starpu_data_handle_t x_lo, starpu_data_handle_t x_hi,
                        starpu_data_handle_t y_lo, starpu_data_handle_t y_hi,
                        starpu_data_handle_t pos);

/* lib/codelets/embedding.c */
/* a table tile of bf16 (elements of 2 bytes) is gathered on a CPU worker */
int nnt_insert_embedding_gather(nnt_ctx *ctx, starpu_data_handle_t tokens,
                                starpu_data_handle_t table, int64_t v0, int zero_first,
                                starpu_data_handle_t out);
int nnt_insert_embedding_scatter(nnt_ctx *ctx, starpu_data_handle_t tokens,
                                 starpu_data_handle_t dout, int64_t v0,
                                 starpu_data_handle_t dtable);
int nnt_insert_embedding_add_pos(nnt_ctx *ctx, starpu_data_handle_t wpe, int64_t nb,
                                 int64_t inner, starpu_data_handle_t out);
int nnt_insert_embedding_sum_pos(nnt_ctx *ctx, starpu_data_handle_t dout, int64_t nb,
                                 int64_t inner, starpu_data_handle_t dwpe);

/* lib/codelets/attention.c; map: the slabs of a block task (cpu/nnt_cpu.h); window: the
 * sliding window (0: plain causal); cap: the scores' soft-cap (0: none). Whether the CPU
 * attention kernels take bf16 operands under NNT_PRECISION_BF16 (oneDNN the backend, with
 * bf16 dot products). */
struct nnt_attn_map;
int nnt_attn_bf16_products(void);
int nnt_insert_attn_fwd_block(nnt_ctx *ctx, const struct nnt_attn_map *map, int64_t tq,
                              int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                              int64_t window, float scale, float cap,
                              const starpu_data_handle_t *h, int init,
                              starpu_data_handle_t pos);
int nnt_insert_attn_fwd_finalize(nnt_ctx *ctx, int64_t nbh, int64_t tq, int64_t hd,
                                 starpu_data_handle_t o, starpu_data_handle_t m,
                                 starpu_data_handle_t l, starpu_data_handle_t lse);
/* attention sinks (gpt-oss) on a query tile of nb x nh slabs: o, lse rescaled in place by the
 * heads' sinks tile; their gradient over the tile added to dsinks (RW)
 * (lib/codelets/attention.c) */
int nnt_insert_attn_sink_fwd(nnt_ctx *ctx, int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                             starpu_data_handle_t o, starpu_data_handle_t lse,
                             starpu_data_handle_t sinks);
int nnt_insert_attn_sink_bwd(nnt_ctx *ctx, int64_t nb, int64_t nh, int64_t tq, int64_t hd,
                             starpu_data_handle_t o, starpu_data_handle_t dout,
                             starpu_data_handle_t lse, starpu_data_handle_t sinks,
                             starpu_data_handle_t dsinks);
int nnt_insert_attn_bwd_prep(nnt_ctx *ctx, int64_t nbh, int64_t tq, int64_t hd,
                             starpu_data_handle_t o, starpu_data_handle_t dout,
                             starpu_data_handle_t d);
int nnt_insert_attn_bwd_block(nnt_ctx *ctx, const struct nnt_attn_map *map, int64_t tq,
                              int64_t tk, int64_t hd, int64_t q_pos0, int64_t k_pos0,
                              int64_t window, float scale, float cap,
                              const starpu_data_handle_t *h, int init_dq, int init_dkv,
                              starpu_data_handle_t pos);
/* A band task (CPU workers only; lib/ops/attention.c): query tile (map, tq rows of hd at
 * q_pos0) against its band of n key tiles in increasing position, tile j of tk[j] rows at
 * k_pos0[j], in one task (nnt_cpu_attn_fwd_band_f32 / _bwd_band_f32). start[j]: the
 * backward's dk and dv of key tile j are only written (its first task). pos: the queries'
 * positions tile, or NULL. Forward handles: q, o, lse and kv = k_j, v_j a key tile; backward:
 * h = q, o, dout, lse, dq and kv = k_j, v_j, dk_j, dv_j a key tile. */
#define NNT_ATTN_BAND_MAX 8
struct nnt_attn_band_task {
    const struct nnt_attn_map *map;
    int64_t tq, hd, q_pos0, window;
    float scale, cap;
    int n;
    int64_t tk[NNT_ATTN_BAND_MAX], k_pos0[NNT_ATTN_BAND_MAX];
    int start[NNT_ATTN_BAND_MAX];
    starpu_data_handle_t pos;
};
int nnt_insert_attn_fwd_band(nnt_ctx *ctx, const struct nnt_attn_band_task *t,
                             starpu_data_handle_t q, starpu_data_handle_t o,
                             starpu_data_handle_t lse, const starpu_data_handle_t *kv);
int nnt_insert_attn_bwd_band(nnt_ctx *ctx, const struct nnt_attn_band_task *t,
                             const starpu_data_handle_t *h, const starpu_data_handle_t *kv);

/* lib/codelets/xent.c */
int nnt_insert_xent_fwd_block(nnt_ctx *ctx, const starpu_data_handle_t *h, int64_t v0,
                              int init);
int nnt_insert_xent_finish(nnt_ctx *ctx, const starpu_data_handle_t *h, int32_t ignore_index,
                           float eps, int64_t vocab);
int nnt_insert_xent_bwd_block(nnt_ctx *ctx, const starpu_data_handle_t *h, int64_t v0,
                              int32_t ignore_index, float scale, float eps, int64_t vocab);

/* ---- helpers for tensor operations (lib/ops/common.c) --------------------------------- */

/* Number of elements of a box. */
int64_t nnt_box_numel(int ndim, const int64_t *shape);
/* Element strides of a contiguous row-major array of the given shape. */
void nnt_row_major_strides(int ndim, const int64_t *shape, int64_t *stride);
/* Linear tile index of a grid coordinate. */
int64_t nnt_tensor_tile_index(const nnt_tensor *t, const int64_t *coord);
/* Shape of the tile at linear index i. */
void nnt_tensor_tile_shape_at(const nnt_tensor *t, int64_t i, int64_t *shape);
/* Bytes of the whole tensor. */
int64_t nnt_tensor_bytes(const nnt_tensor *t);
/* Bytes of the tile at linear index i. */
int64_t nnt_tensor_tile_bytes(const nnt_tensor *t, int64_t i);
/* Whether a and b (valid tensors) have equal shapes and tilings; records nothing. */
int nnt_same_layout(const nnt_tensor *a, const nnt_tensor *b);
/* NNT_E_SHAPE (recorded, naming fn and the roles) unless a and b have equal shapes and
 * tilings; also checks that both are usable. */
int nnt_check_same_layout(const char *fn, const char *role_a, const nnt_tensor *a,
                          const char *role_b, const nnt_tensor *b);
/* NNT_E_INVAL naming role if t is NULL; else a usable tensor (also readable if must_read)
 * of the given dtype (NNT_E_SHAPE otherwise). The usual first check of an op argument. */
int nnt_check_arg(const char *fn, const char *role, const nnt_tensor *t, nnt_dtype dtype,
                  int must_read);
/* "NNT_FP32", ... (static). */
const char *nnt_dtype_name(nnt_dtype dtype);
/* NNT_E_SHAPE unless t's dtype is dtype. */
int nnt_check_dtype(const char *fn, const char *role, const nnt_tensor *t, nnt_dtype dtype);
/* NNT_E_SHAPE unless dims [a0, a0+n) of a equal dims [b0, b0+n) of b in size and tile. */
int nnt_check_dims(const char *fn, const char *role_a, const nnt_tensor *a, int a0,
                   const char *role_b, const nnt_tensor *b, int b0, int n);
/* NNT_E_INVAL (naming fn, name and value) unless value is finite and lo <= value (lo < value
 * if strict_lo) and value < hi (value <= hi if closed_hi); NaN fails. */
int nnt_check_range(const char *fn, const char *name, double value, double lo, int strict_lo,
                    double hi, int closed_hi);
/* The Adam hyperparameters shared by every options structure: lr >= 0, beta1 and beta2 in
 * [0, 1), eps > 0 (nnt_check_range's errors). */
int nnt_check_adam_hparams(const char *fn, double lr, double beta1, double beta2, double eps);
/* An internal temporary tensor in t's context (not visible to the user). */
int nnt_temp_create(nnt_ctx *ctx, nnt_dtype dtype, int ndim, const int64_t *shape,
                    const int64_t *tile, nnt_tensor **out);
/* Release a temporary without waiting: its tiles are freed once their tasks are done. */
void nnt_temp_release(nnt_tensor *t);
/* A temporary with src's shape and dtype but the given tiling, holding a copy of src
 * (nnt_tensor_copy): how an op retiles an input whose tiling does not fit it. */
int nnt_retile_temp(nnt_tensor *src, const int64_t *tile, nnt_tensor **out);
/* lib/ops/copy.c: *exact = 1 when every value of float tensor t is a bf16 value (a pass
 * over t on CPU workers, then a wait for its per-tile counts), else 0; 0 without checking
 * for a tensor of another dtype, unwritten, or spread over MPI ranks. */
int nnt_tensor_bf16_exact(nnt_tensor *t, int *exact);
/* Ops whose kernels need the last dimension whole (LayerNorm, RMSNorm, attention's hd).
 * nnt_check_row_vector: vec must be (C), C = x's last dimension (any tiling).
 * nnt_check_row_stat: stat (...) must have x's leading dimensions and their tiling. */
int nnt_check_row_vector(const char *fn, const char *role, const nnt_tensor *vec,
                         const nnt_tensor *x);
int nnt_check_row_stat(const char *fn, const char *role, const nnt_tensor *stat,
                       const nnt_tensor *x);
/* *out = t if its last dimension is one tile, else a retiled copy of t (a temporary). */
int nnt_whole_last_in(nnt_tensor *t, nnt_tensor **out);
/* *out = t if its last dimension is one tile, else an unwritten temporary with it whole. */
int nnt_whole_last_out(nnt_tensor *t, nnt_tensor **out);
/* After the tasks writing tmp (the stand-in of output dst, or dst itself) were submitted
 * with status rc: mark tmp written and, if it is a stand-in, copy it into dst and release
 * it. Returns the new status. */
int nnt_whole_last_finish(nnt_tensor *tmp, nnt_tensor *dst, int rc);
/* Release a stand-in input (no-op when it is the tensor itself or NULL). */
void nnt_whole_last_drop(nnt_tensor *tmp, nnt_tensor *orig);
/* dst (just written by a copy of src, same shape, row-major order kept) holds src's values
 * as kept on the host (ids_host), when they are: the copy keeps them (not ids_known). */
void nnt_tensor_copy_known_ids(const nnt_tensor *src, nnt_tensor *dst);
/* Mark t as written (after its producing tasks were submitted). */
static inline void nnt_tensor_mark_written(nnt_tensor *t)
{
    t->written = 1;
    t->ids_known = 0;   /* the values a task wrote are not known on the host */
    t->ids_host_n = 0;
}

/* ---- tokenizers (lib/data/tokenizer.c) ------------------------------------------------- */
/* The special ids tok's post-processor adds before and after one sequence when special
 * tokens are added (a Hugging Face TemplateProcessing "single"; none for others). */
void nnt_tokenizer_single_affixes(const nnt_tokenizer *tok, const int32_t **pre, size_t *npre,
                                  const int32_t **post, size_t *npost);

/* ---- task statistics, tracing and memory statistics (lib/trace/trace.c) ---------------- */

/* Switch StarPU's task profiling on and zero the statistics (nnt_ctx_create, once StarPU
 * runs); forget them and any unfinished trace (nnt_ctx_destroy, after the last wait). */
void nnt_stats_ctx_start(nnt_ctx *ctx);
void nnt_stats_ctx_stop(nnt_ctx *ctx);
/* Give a task the completion callback that feeds the statistics and the trace
 * (nnt_submit, before submission). */
void nnt_stats_task_hook(struct starpu_task *task);
/* The tasks of nnt_submit run (their callbacks done) and the sum of their bodies' times
 * since the context started or the last reset (reset: zeroed after the read). */
void nnt_stats_tasks(int64_t *tasks, int64_t *busy_ns, int reset);

/* Which tensors move (lib/trace/moves.c). Register a tensor's tile as a StarPU vector of nx
 * elements of elsize bytes, home node -1, whose transfers between RAM and the disk swap or a
 * GPU count as kind's (NNT_MEM_*) until StarPU frees it; change a registered tile's kind;
 * read the bytes counted by kind into s's *_by arrays (zeroed after when reset). */
void nnt_moves_register(starpu_data_handle_t *h, uint32_t nx, size_t elsize, int kind);
void nnt_moves_set_kind(starpu_data_handle_t h, int kind);
void nnt_moves_read(nnt_mem_stats *s, int reset);
/* Every tile forgotten and the counts zeroed: when a context starts and when it ends. */
void nnt_moves_clear(void);
/* What t's tiles hold from now on (NNT_MEM_*): gradients, optimizer state; t's kind is kept
 * across nnt_tensor_retype. Its tiles are marked so (nnt_handle_mark_kind). */
void nnt_tensor_set_kind(nnt_tensor *t, int kind);
/* A parameter's bf16 copy (nnt_tensor.bf16_copy). nnt_tensor_copy_link: copy (w's layout)
 * becomes w's, holding none of its values yet; NNT_E_NOMEM. nnt_tensor_copy_current: the
 * copy holds the values w's tiles have now (no task wrote them since). nnt_tensor_copy_mark:
 * tile i (all when i < 0) holds w's values as they are after the tasks submitted so far.
 * nnt_tensor_copy_forget: no tile does (w's tiles were replaced or invalidated).
 * nnt_tensor_copy_unlink: before t (either side) is freed. */
int nnt_tensor_copy_link(nnt_tensor *w, nnt_tensor *copy);
int nnt_tensor_copy_current(const nnt_tensor *copy);
void nnt_tensor_copy_mark(nnt_tensor *copy, int64_t i);
void nnt_tensor_copy_forget(nnt_tensor *t);
void nnt_tensor_copy_unlink(nnt_tensor *t);
/* The priority of the tasks the next layer's forward or backward submits (ctx->task_prio,
 * lowered by 2; back to 0 long before it could overflow). */
void nnt_layer_next_priority(nnt_ctx *ctx);

/* What the RAM hooks did since they were installed (lib/ctx_ram.c): blocks handed to StarPU
 * from their own mapping, of which mapped afresh and reused from a freed one; the bytes of
 * freed blocks kept now, of blocks handed out now and at most at once (since the last
 * nnt_ram_settle). */
typedef struct {
    int64_t blocks, mapped, reused, kept_bytes, live_bytes, peak_bytes;
} nnt_ram_stats;
void nnt_ram_stats_get(nnt_ram_stats *out);
/* In RAM (no swap): the blocks handed out now become the peak the kept ones are held to (9/8
 * of it), and those beyond go. After a passing peak whose blocks will not come again. */
void nnt_ram_settle(void);

/* A classifier's label names (id2label; classification records' labels by name): names fit
 * for labels are 1 to NNT_LABEL_NAME_MAX bytes, no control character, each once; else
 * NNT_E_INVAL naming fn and the label (lib/models/transformer.c). */
#define NNT_LABEL_NAME_MAX 255
int nnt_label_names_check(nnt_ctx *ctx, const char *fn, const char *const *names, int64_t n);
void nnt_label_names_free(char **names, int64_t n);
/* Label k's name: names[k], or (names NULL) transformers' default "LABEL_k" written in buf
 * (at least 32 bytes) */
const char *nnt_label_name_at(const char *const *names, int64_t k, char *buf, size_t size);
/* names checked (nnt_label_names_check), then copied into *out (NULL for n 0) */
int nnt_label_names_copy(nnt_ctx *ctx, const char *fn, const char *const *names, int64_t n,
                         char ***out);

#endif /* NNT_INTERNAL_H */
