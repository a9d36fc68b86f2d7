/* SPDX-License-Identifier: MIT */
/* nnt_ctx: the runtime's start-up and shut-down and the one live context per process:
 * nnt_ctx_create (options read and checked, environment set, kernels chosen, StarPU or
 * StarPU-MPI started, disk swap registered), nnt_ctx_destroy, nnt_ctx_wait and the getters;
 * task failures (nnt_task_error); what idle CPU workers do. The rest of the context:
 *   ctx_options.c  nnt_ctx_options: defaults (two symbol versions), reading, checks
 *   ctx_env.c      the environment variables StarPU reads at start-up (memory budgets, model
 *                  directory, binding, topology), set and put back
 *   ctx_workers.c  per-worker resources: scratch memory, oneDNN caches, cuBLASLt handles
 *   ctx_tensors.c  the registry of live tensors and the memory-budget checks
 *   ctx_alloc.c    what StarPU allocates for a tile (pinned RAM and GPU memory in chunks)
 * What they share: ctx_impl.h. */
#include "ctx_impl.h"
#include "io/io.h"
#include "nnt_cpu.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static nnt_ctx *live_ctx;   /* the one started context, NULL when none */
static int task_failed;     /* set by nnt_task_error, cleared by nnt_ctx_wait */

void nnt_task_error(const char *codelet, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    nnt_log(NNT_LOG_ERROR, "task %s: %s", codelet, msg);
    __atomic_store_n(&task_failed, 1, __ATOMIC_SEQ_CST);
}

int nnt_ctx_check(const nnt_ctx *ctx, const char *func)
{
    pthread_mutex_lock(&live_lock);
    int live = ctx && ctx == live_ctx;
    pthread_mutex_unlock(&live_lock);
    if (live)
        return NNT_OK;
    if (!func)
        return NNT_E_STATE;
    if (!ctx)
        return nnt_fail(NULL, NNT_E_INVAL, "%s: context is NULL", func);
    return nnt_fail(NULL, NNT_E_STATE, "%s: not a live context (destroyed already?)", func);
}

/* An NNT_* variable with two values: *second 0 when it is unset, empty (the default, as for
 * NNT_GEMM) or `first`, 1 when it is `second`; any other value fails, the message saying what
 * was expected. */
static int env_choice(const char *name, const char *first, const char *second,
                      const char *expected, int *is_second)
{
    const char *v = getenv(name);
    *is_second = 0;
    if (!v || !*v || !strcmp(v, first))
        return NNT_OK;
    if (strcmp(v, second))
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: %s=%s: expected %s", name, v,
                        expected);
    *is_second = 1;
    return NNT_OK;
}

/* ---- idle CPU workers ------------------------------------------------------------------
 * StarPU 1.3 as Debian builds it (STARPU_NON_BLOCKING_DRIVERS) has an idle CPU worker poll
 * for work without ever giving its core away. Where threads outnumber cores that poll holds
 * a core the threads that would give it work need: StarPU-MPI's progress thread, the other
 * ranks of the node, the thread submitting tasks. Measured on 2 cores, GPT-2 124M, 2 ranks
 * x 1 worker: idle workers took a third of all CPU time while each transfer waited a time
 * slice for its progress thread (bench/RESULTS-mpi.md). So each empty poll calls
 * sched_yield: the core goes to any other runnable thread, and the worker polls on at once
 * when there is none (one process x 2 workers: the same speed). NNT_WORKER_IDLE=spin keeps
 * StarPU's own behaviour. */
static int idle_hook = -1;   /* StarPU's id of the hook, -1 when none is registered */
static int idle_spin;        /* NNT_WORKER_IDLE=spin, for the context being started */

static unsigned yield_when_idle(void *arg)
{
    (void)arg;
    sched_yield();
    return 1;   /* a worker that can block may still do so */
}

/* After starpu_init; shutdown_runtime deregisters it */
static void register_idle_hook(void)
{
    if (idle_spin)
        return;
    idle_hook = starpu_idle_hook_register(yield_when_idle, NULL);
    if (idle_hook < 0)
        nnt_log(NNT_LOG_WARN, "StarPU has no room for another idle hook: idle CPU workers "
                "will spin");
}

static void shutdown_runtime(int mpi)
{
    if (idle_hook >= 0)
        starpu_idle_hook_deregister(idle_hook);
    idle_hook = -1;
    if (mpi)
        nnt_mpi_shutdown_runtime();
    else
        starpu_shutdown();
}

static int start_starpu(const nnt_ctx_options *o)
{
    int mpi = o->mpi;
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    conf.ncpus = o->ncpus > 0 && cores > 0 && o->ncpus > cores ? (int)cores : o->ncpus;
    if (conf.ncpus != o->ncpus)   /* more workers than cores: slower */
        nnt_log(NNT_LOG_WARN, "ncpus %d: this machine has %ld cores online; %d CPU workers",
                o->ncpus, cores, conf.ncpus);
    conf.ncuda = o->ncuda;
    conf.nopencl = 0;
    conf.nmic = 0;
    conf.nmpi_ms = 0;
    if (o->sched)
        conf.sched_policy_name = o->sched;
#ifdef NNT_CUDA_CODELETS
    /* With GPUs, a scheduler that weighs task times and transfers (its perf models) instead
     * of letting CPU workers take GPU-sized tasks; the user's choice or STARPU_SCHED wins. */
    int ndev = 0;
    if (!o->sched && !getenv("STARPU_SCHED") && o->ncuda != 0 &&
        cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0)
        conf.sched_policy_name = "dmdas";
#endif
    /* StarPU loads hwloc's topology once, at start: a corrected copy where hwloc counts less
     * main memory than the machine has (lib/topology.c), only for that */
    char topology[512];
    int rc = nnt_topology_file(topology, sizeof topology);
    if (rc)
        return rc;
    if (topology[0]) {
        ctx_set_var(HWLOC_XML, topology);
        ctx_set_var(HWLOC_THIS, "1");
    }
    rc = mpi ? nnt_mpi_init_runtime(&conf) : starpu_init(&conf);
    if (topology[0]) {
        ctx_restore_var(HWLOC_XML);
        ctx_restore_var(HWLOC_THIS);
        unlink(topology);
    }
    if (rc == -ENODEV)
        return nnt_fail(NULL, NNT_E_UNSUPPORTED, "nnt_ctx_create: StarPU found no worker for "
                        "ncpus=%d ncuda=%d", o->ncpus, o->ncuda);
    if (rc != 0)
        return nnt_fail(NULL, NNT_E_RUNTIME, "nnt_ctx_create: starpu_init failed: %s",
                        strerror(-rc));
    register_idle_hook();
    /* A CUDA-enabled StarPU starts without the GPUs it cannot use (no device, no driver) */
    int got = (int)starpu_cuda_worker_get_count();
    if (o->ncuda > 0 && got < o->ncuda) {
        shutdown_runtime(mpi);
        return nnt_fail(NULL, NNT_E_UNSUPPORTED, "nnt_ctx_create: %d CUDA devices requested, "
                        "StarPU could start %d (no usable GPU or CUDA driver?)", o->ncuda, got);
    }
    return NNT_OK;
}

/* ---- where tasks run and how StarPU allocates, with CUDA workers ---------------------------
 * NNT_CPU_TASKS: with CUDA workers, "rest" (the default) sends every task that a CUDA worker
 * can run to the CUDA workers only, leaving the CPU workers the tasks that have no CUDA
 * implementation or that it refuses (lib/codelets/submit.c); "all" lets StarPU's scheduler
 * place every task on any worker. Why the default: dmda-family schedulers must first time
 * each kind of task, at each size, on each kind of worker (10 runs, STARPU_CALIBRATE_MINIMUM,
 * before a history-based model counts; until then the task goes to a worker whose model is
 * not calibrated: StarPU's deque_modeling_policy_data_aware.c), so on a machine without
 * performance models the CPU workers ran GPT-2 124M's GPU-sized products, seconds each, in
 * its first steps (110 s for 2 steps on an H200, bench/RESULTS-gpu.md); and a product a CPU
 * core takes seconds for is never worth its transfers next to a GPU. */
static int cpu_tasks_all;   /* for the context being started */

/* NNT_CUDA_ATTN: how CUDA workers compute attention blocks. "products" (the default): as
 * strided-batched cuBLAS products of chunks of query rows with row kernels between them
 * (cpu/attn_products.c), in float, or TF32 on the tensor cores under NNT_PRECISION_TF32 and
 * _BF16; "flash": the flash kernels of cuda/attention.cu, on the CUDA cores. On an H200
 * (bench/RESULTS-gpu.md, 2026-11-29, second session) the products took GPT-2 124M's bf16 step
 * from 157 to 96.5 ms and the 1558M's from 613 to 385 ms, the losses within 4.5e-5 of the
 * flash kernels', and agree with the CPU kernels within 0.05 of their tolerance (float) and
 * 0.16 (TF32) in test_cuda_kernels. */
static int cuda_attn_flash;   /* for the context being started */

/* NNT_OPTIM_ON: "any" (the default) lets a task that writes weights or optimizer state run
 * where any other task would (with CUDA workers, on them); "cpu" keeps such tasks (the
 * optimizer's updates, weight initialisation) on the CPU workers, so that fp32 weights and
 * the moments stay in RAM, and only gradients come from the GPUs and the products' bf16
 * weight copies (written by the same update tasks) go to them: the idea of ZeRO-Offload, for
 * models whose training state does not fit the GPU budget (bench/RESULTS-gpu.md: offloaded
 * by StarPU alone the 1558M moved 69 GiB a step through a quarter budget). */
static int optim_on_cpu;   /* for the context being started */

/* NNT_CUDA_NORM_BWD: how the CUDA LayerNorm and RMSNorm backwards sum dgamma / dbeta over
 * rows: "rows" (the default) one thread block per 32 columns over every row; "chunks" the
 * rows cut into chunks too, their sums added in order by a second kernel
 * (cuda/kernel_util.cuh). On an H200, GPT-2 124M's layernorm_bwd took 4x its forward and
 * 4.7 % of the GPU's time: 24 thread blocks for C 768 (bench/RESULTS-gpu.md). The chunks are
 * not yet run on a GPU, hence not the default. */
static int norm_bwd_chunks;   /* for the context being started */

/* The two-valued variables above, read when a context starts: the first value is the default
 * (also when unset or empty), the flag says whether the second was given. */
static int read_choices(void)
{
    static const struct {
        const char *name, *first, *second, *expected;
        int *is_second;
    } vars[] = {
        {"NNT_WORKER_IDLE", "yield", "spin", "'yield' (the default) or 'spin'", &idle_spin},
        {"NNT_CPU_TASKS", "rest", "all", "'rest' (the default: with CUDA workers, CPU workers "
         "run only the tasks no CUDA worker can) or 'all'", &cpu_tasks_all},
        {"NNT_CUDA_ATTN", "products", "flash", "'products' (the default: cuBLAS products of "
         "query-row chunks) or 'flash' (the flash attention kernels)", &cuda_attn_flash},
        {"NNT_OPTIM_ON", "any", "cpu", "'any' (the default) or 'cpu' (with CUDA workers, tasks "
         "that write weights or optimizer state on CPU workers)", &optim_on_cpu},
        {"NNT_CUDA_NORM_BWD", "rows", "chunks", "'rows' (the default) or 'chunks' (the norms' "
         "parameter gradients summed over row chunks)", &norm_bwd_chunks},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        NNT_TRY(env_choice(vars[i].name, vars[i].first, vars[i].second, vars[i].expected,
                           vars[i].is_second));
    return NNT_OK;
}

/* Whether StarPU allocates RAM pinned and in chunks (lib/ctx_alloc.c): with CUDA workers
 * unless STARPU_DISABLE_PINNING is a positive number (StarPU reads it as a number, -1 when
 * unset). NNT_TEST_PINNED_RAM=1 makes the budget checks count RAM so without CUDA workers:
 * a test hook, for checking those checks on machines without a GPU. */
static int ram_is_chunked(int ncuda)
{
    const char *hook = getenv("NNT_TEST_PINNED_RAM");
    if (hook && !strcmp(hook, "1"))
        return 1;
    const char *off = getenv("STARPU_DISABLE_PINNING");
    return ncuda > 0 && !(off && atoi(off) > 0);
}

/* The smallest budget StarPU holds to on a GPU, bytes; 0 without CUDA workers. */
static int64_t smallest_gpu_budget(void)
{
    int64_t smallest = 0;
    for (unsigned node = 0; node < starpu_memory_nodes_get_count(); node++) {
        if (starpu_node_get_kind(node) != STARPU_CUDA_RAM)
            continue;
        starpu_ssize_t total = starpu_memory_get_total(node);
        if (total > 0 && (smallest == 0 || total < smallest))
            smallest = total;
    }
    return smallest;
}

static void choose_placement(nnt_ctx *ctx)
{
    ctx->ram_chunked = ram_is_chunked(ctx->ncuda);
    ctx->gpu_budget = smallest_gpu_budget();
    ctx->first_cuda_worker = -1;
    if (ctx->ncuda > 0)
        starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, &ctx->first_cuda_worker, 1);
    ctx->cuda_tasks_on_cuda = ctx->ncuda > 0 && ctx->first_cuda_worker >= 0 && !cpu_tasks_all;
    ctx->cuda_attn_products = !cuda_attn_flash;
    ctx->optim_on_cpu = optim_on_cpu;
#ifdef NNT_CUDA_CODELETS
    nnt_cuda_set_norm_split(norm_bwd_chunks);   /* process-wide, as the kernels are */
#endif
    if (ctx->ncuda > 0)
        nnt_log(NNT_LOG_INFO, "%s; RAM %s", ctx->cuda_tasks_on_cuda
                ? "tasks a CUDA worker can run go to the CUDA workers only (NNT_CPU_TASKS=all: "
                  "to any worker)"
                : "tasks go to any worker (NNT_CPU_TASKS=all)",
                ctx->ram_chunked ? "pinned, tiles of up to 4 MiB in 32 MiB chunks"
                                 : "not pinned (STARPU_DISABLE_PINNING)");
    if (ctx->ncuda > 0)
        nnt_log(NNT_LOG_INFO, "attention on CUDA workers: %s", ctx->cuda_attn_products
                ? "cuBLAS products of query-row chunks (NNT_CUDA_ATTN=flash: the flash kernels)"
                : "flash kernels (NNT_CUDA_ATTN=flash)");
}

/* StarPU's disk backend for the swap: NNT_SWAP_BACKEND=stdio (the default) or unistd.
 * stdio (buffered FILE streams, StarPU keeping a bounded set of files open) waited a fifth
 * as long for data as unistd (read/write on one file a tile) with a 0.9B model under a
 * 4 GiB budget, 0.87x the step time (bench/RESULTS-ooc.md, 2026-11-29). StarPU 1.3's
 * O_DIRECT variant is not offered: it aborts the process on any transfer that is not a
 * multiple of the page size, and tiles (biases, norm vectors, edge tiles) have arbitrary
 * sizes. Both pass swapped tiles through the page cache, which the kernel gives back under
 * memory pressure. */
static int swap_backend(struct starpu_disk_ops **ops)
{
    int unistd;
    int rc = env_choice("NNT_SWAP_BACKEND", "stdio", "unistd",
                        "'stdio' (the default) or 'unistd'", &unistd);
    *ops = unistd ? &starpu_disk_unistd_ops : &starpu_disk_stdio_ops;
    return rc;
}

static int register_swap(nnt_ctx *ctx, const nnt_ctx_options *o)
{
    starpu_ssize_t bytes = (starpu_ssize_t)o->swap_mib * 1024 * 1024;
    struct starpu_disk_ops *ops = NULL;
    int rc = swap_backend(&ops);
    if (rc)
        return rc;
    int node = starpu_disk_register(ops, (void *)o->swap_dir, bytes);
    if (node < 0)
        return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: cannot use '%s' for disk swap",
                        o->swap_dir);
    ctx->disk_node = node;
    return NNT_OK;
}

/* The RAM of tiles from nnt's hooks where they can serve (lib/ctx_ram.c, which logs how), or
 * the log line that says StarPU's allocator serves. */
static void use_ram_hooks(nnt_ctx *ctx)
{
    const char *why_not = NULL;
    if (!ctx_ram_install(ctx->ram_budget, ctx->disk_node >= 0, &why_not)) {
        nnt_log(NNT_LOG_INFO, "RAM of tiles: StarPU's allocator (%s)", why_not);
        return;
    }
    ctx->ram_kept = (int64_t)ctx_ram_kept_cap();
}

/* BLIS's kernel set, then the GEMM backend (NNT_GEMM or a feature test), described in
 * ctx->kernels with the elementwise kernels' instruction set (nnt_cpu_isa) and what idle
 * workers do (NNT_WORKER_IDLE); a bad NNT_GEMM or NNT_WORKER_IDLE fails the creation. */
static int choose_kernels(nnt_ctx *ctx)
{
    const char *blis_arch = nnt_cpu_blis_setup();
    char why[200];
    char bf16_why[160];
    int rc = nnt_cpu_gemm_choose(why, sizeof why);
    if (rc == 0 && nnt_cpu_gemm_choose_bf16(bf16_why, sizeof bf16_why) != 0) {
        snprintf(why, sizeof why, "%s", bf16_why);
        rc = -1;
    }
    if (rc == 0 && nnt_cpu_dnnl_choose_b(why, sizeof why) != 0)
        rc = -1;
    if (rc)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: %s", why);
    if ((rc = read_choices()) != 0)
        return rc;
    int dnnl = nnt_cpu_gemm_backend() == NNT_GEMM_ONEDNN;
    ctx->bf16_expanded = dnnl && nnt_cpu_dnnl_bf16_isa() && !nnt_cpu_dnnl_bf16_native();
    char dnnl_desc[240] = "";
    if (dnnl)
        snprintf(dnnl_desc, sizeof dnnl_desc, " (ISA %s, bf16 operands %s%s%s)",
                 nnt_cpu_dnnl_isa(), nnt_cpu_dnnl_bf16_native() ? "direct" : "expanded to fp32",
                 *bf16_why ? ", " : "", bf16_why);
    const int avx512 = nnt_cpu_avx512();
    char wide[96] = "";
    if (avx512)
        snprintf(wide, sizeof wide, " (softmax rows and bf16 conversions 16 floats a step, "
                 "AVX-512F%s)", avx512 == 2 ? " and AVX512-BF16" : "");
    snprintf(ctx->kernels, sizeof ctx->kernels,
             "CPU GEMM %s%s: %s; BLIS kernels %s (%s); elementwise kernels %s%s; idle CPU "
             "workers %s", dnnl ? "oneDNN" : "BLIS", dnnl_desc, why, blis_arch,
             nnt_cpu_blis_reason(), nnt_cpu_isa_name(), wide, idle_spin ? "spin" : "yield");
    return NNT_OK;
}

/* Append to ctx->kernels (its description of the chosen kernels) */
static void kernels_add(nnt_ctx *ctx, const char *fmt, ...) NNT_PRINTF(2, 3);
static void kernels_add(nnt_ctx *ctx, const char *fmt, ...)
{
    size_t len = strlen(ctx->kernels);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->kernels + len, sizeof ctx->kernels - len, fmt, ap);
    va_end(ap);
}

/* What the products do with B (packs, B as stored), whether bf16 products sum their k tiles
 * in one task, and the task order (NNT_TASK_ORDER), described in ctx->kernels. */
static void choose_products(nnt_ctx *ctx)
{
    const char *why_not = NULL;
    ctx->pack_b = nnt_gemm_packs(ctx, &why_not);
    ctx->pack_keep = nnt_gemm_packs_kept(ctx);
    nnt_gemm_kept_start(ctx);
    if (nnt_cpu_gemm_backend() == NNT_GEMM_ONEDNN) {   /* what oneDNN's products do with B */
        if (ctx->pack_keep)
            kernels_add(ctx, "; B tiles of float products shared by %d+ row tiles packed and "
                        "kept while unchanged (up to %lld MiB, %s; beyond, read as stored), "
                        "of bf16 products by %d+ packed once a product",
                        NNT_GEMM_KEEP_MIN_READERS, (long long)(ctx->pack_keep_max >> 20),
                        ctx->pack_keep_given ? "NNT_GEMM_PACK_KEEP_MIB"
                        : "an eighth of the RAM available at start",
                        NNT_GEMM_PACK_MIN_READERS);
        else if (ctx->pack_b)
            kernels_add(ctx, "; B tiles shared by %d+ row tiles packed once a product",
                        NNT_GEMM_PACK_MIN_READERS);
        else
            kernels_add(ctx, "; B tiles shared by %d+ row tiles not packed (%s)",
                        NNT_GEMM_PACK_MIN_READERS, why_not);
        size_t l2 = nnt_cpu_dnnl_bf16_b_stored();   /* those not packed nor reordered */
        if (l2 > 0 && nnt_cpu_dnnl_b_mode() == NNT_DNNL_B_MEASURED)
            kernels_add(ctx, "; products on B tiles not packed (bf16 ones on B tiles over %zu "
                        "KiB, a core's L2 cache, never packed) read them as stored or "
                        "reordered, as each shape's first runs measure faster", l2 >> 10);
        else if (l2 > 0)
            kernels_add(ctx, "; bf16 products read B tiles over %zu KiB (a core's L2 cache) as "
                        "stored", l2 >> 10);
    }
    ctx->ksum = nnt_gemm_sums_k(ctx, &why_not);
    if (ctx->ksum)
        kernels_add(ctx, "; bf16 products sum their k tiles in one task");
    const int band = nnt_cpu_band_level();
    if (band > 0)
        kernels_add(ctx, "; CPU attention's float products by nnt's band products (%s; the "
                    "backward of whole blocks by the backend's)", band == 2 ? "AVX-512F" : "AVX2");
    if (nnt_attn_bf16_products())
        kernels_add(ctx, "; under bf16 precision the CPU attention kernels' products take bf16 "
                    "operands too%s", nnt_cpu_band16_level() > 0
                    ? ", by nnt's bf16 band products (AVX512-BF16; the backward of whole "
                      "blocks by the backend's)" : "");
    if (ctx->ncuda > 0 && ctx->optim_on_cpu)
        kernels_add(ctx, "; tasks that write weights or optimizer state on CPU workers "
                    "(NNT_OPTIM_ON=cpu)");
    else if (ctx->optim_on_cpu)
        nnt_log(NNT_LOG_INFO, "NNT_OPTIM_ON=cpu: no CUDA worker, so every task is on the CPU "
                "workers anyway");
    if (ctx->ncuda > 0 && norm_bwd_chunks)
        kernels_add(ctx, "; CUDA norm backwards sum their parameter gradients over row chunks "
                    "(NNT_CUDA_NORM_BWD=chunks)");
    if (ctx->ncuda > 0)
        kernels_add(ctx, "; attention on CUDA workers %s", ctx->cuda_attn_products
                    ? "by cuBLAS products of query-row chunks (TF32 under bf16 and tf32 "
                      "precision)" : "by the flash kernels (NNT_CUDA_ATTN=flash)");
    /* opt-in (its gain was small and mixed: bench/RESULTS-bf16.md); the wrong gradients
     * first seen with it came from oneDNN's scratchpads (cpu/gemm_dnnl.c, made_from), with
     * either order */
    const char *order = getenv("NNT_TASK_ORDER");
    ctx->task_order = order && strcmp(order, "1") == 0;
    if (ctx->task_order)
        kernels_add(ctx, "; tasks prioritized by layer, weight gradients after their layer's "
                    "input gradient");
}

/* What lib/io's writers tell without failing (stale temporary files removed) goes to the
 * log as a warning. */
static void io_note(const char *msg)
{
    nnt_log(NNT_LOG_WARN, "%s", msg);
}

int nnt_ctx_create(const nnt_ctx_options *user_opts, nnt_ctx **out)
{
    nnt_ctx_options opts;
    nnt_io_set_note(io_note);
    if (!out)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: output pointer is NULL");
    *out = NULL;
    int rc = ctx_read_options(user_opts, &opts);
    if (rc)
        return rc;
    rc = ctx_validate_options(&opts);
    int rank = 0, nranks = 1, node_ranks = 1;
    /* this rank's main memory for tiles (its RAM budget, else the machine's); under MPI the
     * smallest rank's */
    int64_t ram_mib = opts.mem_cpu_mib > 0 ? opts.mem_cpu_mib : nnt_host_ram_bytes() >> 20;
    /* read before MPI and StarPU start, and before the other ranks of this node hold tiles */
    int64_t avail = nnt_host_available_bytes();
    if (opts.mpi)   /* collective: every rank learns whether all can go on */
        rc = nnt_mpi_agree(&opts, rc, &rank, &nranks, &ram_mib, &node_ranks);
    if (rc)
        return rc;

    nnt_ctx *ctx = calloc(1, sizeof *ctx + (size_t)nranks * sizeof ctx->ranks[0]);
    if (!ctx)
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_ctx_create: out of host memory");
    pthread_mutex_lock(&live_lock);
    if (live_ctx) {
        pthread_mutex_unlock(&live_lock);
        free(ctx);
        return nnt_fail(NULL, NNT_E_BUSY, "nnt_ctx_create: a context is already live in this "
                        "process; destroy it first (one context per process)");
    }
    rc = ctx_configure_environment(&opts, opts.mpi && nranks > 1 ? rank : -1);
    if (rc == 0)
        rc = choose_kernels(ctx);   /* before any task runs a GEMM, before workers poll */
    if (rc == 0)
        rc = start_starpu(&opts);
    if (rc) {
        ctx_restore_limits();
        pthread_mutex_unlock(&live_lock);
        free(ctx);
        return rc;
    }
    ctx->magic = NNT_CTX_MAGIC;
    ctx->disk_node = -1;
    ctx->mpi = opts.mpi;
    ctx->rank = rank;
    ctx->nranks = nranks;
    ctx->node_ranks = node_ranks;
    ctx->distribution = opts.distribution;
    /* only where tiles have other owners than the rank using them */
    ctx->release_weights = opts.release_weights && opts.mpi && nranks > 1 &&
                           opts.distribution != NNT_DIST_ROOT;
    ctx->min_rank_ram = ram_mib << 20;
    ctx->next_tag = 1;
    pthread_mutex_init(&ctx->lock, NULL);
    ctx_start_cuda_libraries();
    ctx->ncpus = (int)starpu_cpu_worker_get_count();
    ctx->ncuda = (int)starpu_cuda_worker_get_count();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (opts.ncpus > 0 && ctx->ncpus < opts.ncpus && ctx->ncpus < cores)
        nnt_log(NNT_LOG_WARN, "ncpus %d: StarPU started %d CPU workers (its limit "
                "STARPU_MAXCPUS, or cores kept for GPUs)", opts.ncpus, ctx->ncpus);
    if (opts.mem_gpu_mib > 0 && ctx->ncuda == 0 && rank == 0)
        nnt_log(NNT_LOG_WARN, "mem_gpu_mib %lld: no CUDA worker started, so no GPU budget "
                "applies", (long long)opts.mem_gpu_mib);
    if (opts.release_weights && !ctx->release_weights && rank == 0)
        nnt_log(NNT_LOG_WARN, "release_weights: %s; nothing to release", nranks < 2
                ? "one process holds every tile" : "the root distribution keeps every tile "
                "on rank 0");
    struct starpu_sched_policy *policy = starpu_sched_ctx_get_sched_policy(0);
    ctx->sched = policy && policy->policy_name ? policy->policy_name : "unknown";
    choose_placement(ctx);
    if (opts.swap_dir && (rc = register_swap(ctx, &opts)) != 0) {
        ctx_stop_cuda_libraries();
        shutdown_runtime(ctx->mpi);
        ctx_free_cpu_scratch();
        ctx_restore_limits();
        pthread_mutex_destroy(&ctx->lock);
        pthread_mutex_unlock(&live_lock);
        free(ctx);
        return rc;
    }
    choose_products(ctx);
    ctx->debug_faults = nnt_debug_tasks_faults();
    if (nnt_debug_tasks_on())
        kernels_add(ctx, "; every task checked on CPU workers (NNT_DEBUG_TASKS)");
    /* Ours or the user's; without one StarPU still limits itself to the machine's main
     * memory, and spins forever when tiles exceed that: use it too. */
    const char *limit = getenv("STARPU_LIMIT_CPU_MEM");
    starpu_ssize_t starpu_total = starpu_memory_get_total(STARPU_MAIN_RAM);
    ctx->ram_budget = limit ? atoll(limit) * 1024 * 1024 : starpu_total > 0 ? starpu_total : 0;
    if (starpu_total > 0 && ctx->ram_budget > starpu_total)
        ctx->ram_budget = starpu_total;   /* StarPU holds to the smaller of the two */
    ctx->ram_budget_default = !limit && ctx->ram_budget > 0;
    if (ctx->ram_budget_default) {
        /* The main memory counts what the system and other processes hold, and tiles up to
         * it had the kernel kill the process instead of a refusal: the budget checks hold
         * to what was available at start, less a sixteenth for the process's own memory
         * outside the tiles (libraries, heap, the blocks kept for reuse beyond the budget's
         * room: lib/ctx_ram.c); the ranks of an MPI job on one node share it. StarPU's own
         * limit stays the main memory. */
        int64_t room = (avail - avail / 16) / node_ranks;
        if (room > 0 && room < ctx->ram_budget)
            ctx->ram_budget = room;
    }
    ctx->swap_bytes = opts.swap_dir ? opts.swap_mib * 1024 * 1024 : 0;
    use_ram_hooks(ctx);
    nnt_stats_ctx_start(ctx);
    nnt_io_set_writer(rank == 0);   /* under MPI rank 0 alone writes files */
    live_ctx = ctx;
    pthread_mutex_unlock(&live_lock);
    nnt_log(NNT_LOG_INFO, "context: %d CPU workers, %d CUDA workers, scheduler %s; %s%s "
            "(rank %d of %d)", ctx->ncpus, ctx->ncuda, ctx->sched, ctx->kernels,
            ctx->mpi ? ", over MPI" : "", ctx->rank, ctx->nranks);
    *out = ctx;
    return NNT_OK;
}

/* Every task submitted so far; under MPI also every transfer, on every rank (collective). */
static int wait_all(nnt_ctx *ctx)
{
    return ctx->mpi ? nnt_mpi_wait_all() : starpu_task_wait_for_all();
}

int nnt_ctx_destroy(nnt_ctx *ctx)
{
    if (!ctx)
        return NNT_OK;
    int rc = nnt_ctx_check(ctx, "nnt_ctx_destroy");
    if (rc)
        return rc;
    wait_all(ctx);
    unsigned long faults = nnt_debug_tasks_faults() - ctx->debug_faults;
    nnt_stats_ctx_stop(ctx);
    ctx_orphan_tensors(ctx);
    nnt_gemm_kept_drain();
    pthread_mutex_lock(&live_lock);
    live_ctx = NULL;
    pthread_mutex_unlock(&live_lock);
    ctx_stop_cuda_libraries();
    shutdown_runtime(ctx->mpi);
    ctx_ram_remove();
    ctx_free_cpu_scratch();
    ctx_restore_limits();
    nnt_io_set_writer(1);
    pthread_mutex_destroy(&ctx->lock);
    ctx->magic = 0;
    free(ctx);
    if (faults > 0)
        return nnt_fail(NULL, NNT_E_RUNTIME, "nnt_ctx_destroy: NNT_DEBUG_TASKS found %lu "
                        "faults in the tasks of this context (logged as they happened)",
                        faults);
    return NNT_OK;
}

int nnt_ctx_wait(nnt_ctx *ctx)
{
    int rc = nnt_ctx_check(ctx, "nnt_ctx_wait");
    if (rc)
        return rc;
    if (wait_all(ctx) != 0)
        return nnt_fail(ctx, NNT_E_RUNTIME, "nnt_ctx_wait: waiting for tasks failed");
    if (__atomic_exchange_n(&task_failed, 0, __ATOMIC_SEQ_CST))
        return nnt_fail(ctx, NNT_E_RUNTIME, "nnt_ctx_wait: a task failed since the last wait "
                        "(its error was logged)");
    return NNT_OK;
}

int nnt_ctx_workers(const nnt_ctx *ctx, int *ncpus, int *ncuda)
{
    int rc = nnt_ctx_check(ctx, "nnt_ctx_workers");
    if (rc)
        return rc;
    if (ncpus)
        *ncpus = ctx->ncpus;
    if (ncuda)
        *ncuda = ctx->ncuda;
    return NNT_OK;
}

int nnt_ctx_sched(const nnt_ctx *ctx, const char **name)
{
    int rc = nnt_ctx_check(ctx, "nnt_ctx_sched");
    if (rc)
        return rc;
    if (!name)
        return nnt_fail(ctx, NNT_E_INVAL, "nnt_ctx_sched: name is NULL");
    *name = ctx->sched;
    return NNT_OK;
}

int nnt_ctx_kernels(const nnt_ctx *ctx, const char **desc)
{
    int rc = nnt_ctx_check(ctx, "nnt_ctx_kernels");
    if (rc)
        return rc;
    if (!desc)
        return nnt_fail(ctx, NNT_E_INVAL, "nnt_ctx_kernels: desc is NULL");
    *desc = ctx->kernels;
    return NNT_OK;
}

int nnt_ctx_set_precision(nnt_ctx *ctx, nnt_precision precision)
{
    int rc = nnt_ctx_check(ctx, "nnt_ctx_set_precision");
    if (rc)
        return rc;
    if (precision != NNT_PRECISION_FP32 && precision != NNT_PRECISION_TF32 &&
        precision != NNT_PRECISION_BF16)
        return nnt_fail(ctx, NNT_E_INVAL,
                        "nnt_ctx_set_precision: precision %d is none of NNT_PRECISION_FP32 (0), "
                        "NNT_PRECISION_TF32 (1), NNT_PRECISION_BF16 (2)",
                        (int)precision);
    ctx->precision = precision;
    return NNT_OK;
}

int nnt_ctx_precision(const nnt_ctx *ctx, nnt_precision *precision)
{
    int rc = nnt_ctx_check(ctx, "nnt_ctx_precision");
    if (rc)
        return rc;
    if (!precision)
        return nnt_fail(ctx, NNT_E_INVAL, "nnt_ctx_precision: precision is NULL");
    *precision = ctx->precision;
    return NNT_OK;
}
