/* nnt_ctx: options, StarPU start-up and shut-down, the one live context per process. */
#include "internal.h"
#include "io/io.h"
#include "nnt_cpu.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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

/* Per worker: scratch memory grown on demand (the GEMM codelet's rounded or converted
 * operands), in RAM for CPU workers and on the GPU for CUDA workers. Only its own worker
 * touches an entry while the runtime runs. */
static struct {
    void *ptr;
    size_t bytes;
    int on_gpu;
} worker_scratch[STARPU_NMAXWORKERS];

#ifdef NNT_CUDA_CODELETS
/* stream-ordered, so the worker's earlier tasks may still use the old block */
static void *grow_gpu_scratch(int w, size_t bytes)
{
    cudaStream_t stream = starpu_cuda_get_local_stream();
    void *p = NULL;
    if (worker_scratch[w].ptr)
        cudaFreeAsync(worker_scratch[w].ptr, stream);
    worker_scratch[w].ptr = NULL;
    worker_scratch[w].bytes = 0;
    if (cudaMallocAsync(&p, bytes, stream) != cudaSuccess) {
        (void)cudaGetLastError();   /* not sticky: do not leave it to the next launch check */
        return NULL;
    }
    worker_scratch[w].on_gpu = 1;
    return p;
}
#endif

void *nnt_worker_scratch(size_t bytes)
{
    int w = starpu_worker_get_id();
    if (w < 0 || w >= STARPU_NMAXWORKERS)
        return NULL;
    if (worker_scratch[w].ptr && worker_scratch[w].bytes >= bytes)
        return worker_scratch[w].ptr;
    size_t want = bytes + bytes / 4 + 64;   /* headroom: tile sizes vary a little; never 0 */
    void *p;
#ifdef NNT_CUDA_CODELETS
    if (starpu_worker_get_type(w) == STARPU_CUDA_WORKER)
        p = grow_gpu_scratch(w, want);
    else
#endif
    {
        free(worker_scratch[w].ptr);   /* the old content is not needed */
        p = malloc(want);
    }
    worker_scratch[w].ptr = p;
    worker_scratch[w].bytes = p ? want : 0;
    return p;
}

static nnt_dnnl_cache *worker_dnnl[STARPU_NMAXWORKERS];

static nnt_dnnl_cache *worker_dnnl_cache(void)
{
    int w = starpu_worker_get_id();
    if (w < 0 || w >= STARPU_NMAXWORKERS)
        return NULL;
    if (!worker_dnnl[w])
        worker_dnnl[w] = nnt_cpu_dnnl_cache_create();
    return worker_dnnl[w];
}

nnt_dnnl_cache *nnt_worker_product_cache(void)
{
    return nnt_cpu_gemm_backend() == NNT_GEMM_ONEDNN ? worker_dnnl_cache() : NULL;
}

/* After the runtime stopped: the RAM scratch (GPU scratch goes with the CUDA libraries). */
static void free_cpu_scratch(void)
{
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) {
        nnt_cpu_dnnl_cache_destroy(worker_dnnl[w]);
        worker_dnnl[w] = NULL;
    }
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) {
        if (worker_scratch[w].on_gpu)
            continue;
        free(worker_scratch[w].ptr);
        worker_scratch[w].ptr = NULL;
        worker_scratch[w].bytes = 0;
    }
}

#ifdef NNT_CUDA_CODELETS
/* Per CUDA worker: a cuBLASLt handle and a workspace for fused GEMM epilogues. */
#define NNT_LT_WORKSPACE (32u << 20)
static struct {
    cublasLtHandle_t handle;
    void *workspace;
} cuda_lt[STARPU_NMAXWORKERS];

static void lt_init_worker(void *arg)
{
    (void)arg;
    int w = starpu_worker_get_id();
    if (cublasLtCreate(&cuda_lt[w].handle) != CUBLAS_STATUS_SUCCESS)
        cuda_lt[w].handle = NULL;
    if (cudaMalloc(&cuda_lt[w].workspace, NNT_LT_WORKSPACE) != cudaSuccess)
        cuda_lt[w].workspace = NULL;
}

static void lt_free_worker(void *arg)
{
    (void)arg;
    int w = starpu_worker_get_id();
    if (cuda_lt[w].handle)
        cublasLtDestroy(cuda_lt[w].handle);
    if (cuda_lt[w].workspace)
        cudaFree(cuda_lt[w].workspace);
    cuda_lt[w].handle = NULL;
    cuda_lt[w].workspace = NULL;
    if (worker_scratch[w].on_gpu && worker_scratch[w].ptr) {
        cudaFreeAsync(worker_scratch[w].ptr, starpu_cuda_get_local_stream());
        cudaStreamSynchronize(starpu_cuda_get_local_stream());
    }
    worker_scratch[w].ptr = NULL;
    worker_scratch[w].bytes = 0;
    worker_scratch[w].on_gpu = 0;
}

cudaStream_t nnt_cuda_task_stream(void)
{
    (void)cudaGetLastError();
    return starpu_cuda_get_local_stream();
}

int nnt_cuda_worker_lt(cublasLtHandle_t *handle, void **workspace, size_t *workspace_size)
{
    int w = starpu_worker_get_id();
    if (w < 0 || !cuda_lt[w].handle || !cuda_lt[w].workspace)
        return -1;
    *handle = cuda_lt[w].handle;
    *workspace = cuda_lt[w].workspace;
    *workspace_size = NNT_LT_WORKSPACE;
    return 0;
}

static void start_cuda_libraries(void)
{
    if (starpu_cuda_worker_get_count() == 0)
        return;
    starpu_cublas_init();
    starpu_execute_on_each_worker(lt_init_worker, NULL, STARPU_CUDA);
}

static void stop_cuda_libraries(void)
{
    if (starpu_cuda_worker_get_count() == 0)
        return;
    starpu_execute_on_each_worker(lt_free_worker, NULL, STARPU_CUDA);
    starpu_cublas_shutdown();
}
#else
static void start_cuda_libraries(void) {}
static void stop_cuda_libraries(void) {}
#endif

/* nnt_ctx_options grew in 0.3 (mpi, distribution). A program built against 0.2 passes the
 * shorter structure to nnt_ctx_options_init, which must not write past it: the symbol keeps
 * its 0.2 behaviour at version NNT_0.1 (the defaults of the 0.2 fields, size = their size),
 * and programs built now bind to the NNT_0.3 version, which fills the whole structure.
 * nnt_ctx_create accepts both sizes. */
static int options_init(nnt_ctx_options *opts, size_t size)
{
    static const nnt_ctx_options defaults = NNT_CTX_OPTIONS_INIT;
    if (!opts)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_options_init: opts is NULL");
    memcpy(opts, &defaults, size);
    opts->size = size;
    return NNT_OK;
}

#ifdef NNT_SYMBOL_VERSIONS   /* ELF with GNU symbol versions (the shared library's build) */
NNT_API int nnt_ctx_options_init_v0_1(nnt_ctx_options *opts);
NNT_API int nnt_ctx_options_init_v0_3(nnt_ctx_options *opts);
__asm__(".symver nnt_ctx_options_init_v0_1,nnt_ctx_options_init@NNT_0.1");
__asm__(".symver nnt_ctx_options_init_v0_3,nnt_ctx_options_init@@NNT_0.3");

int nnt_ctx_options_init_v0_1(nnt_ctx_options *opts)
{
    return options_init(opts, offsetof(nnt_ctx_options, mpi));
}

int nnt_ctx_options_init_v0_3(nnt_ctx_options *opts)
#else
int nnt_ctx_options_init(nnt_ctx_options *opts)
#endif
{
    return options_init(opts, sizeof *opts);
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

/* Copy the caller's options over the defaults, honouring its size field. */
static int read_options(const nnt_ctx_options *user, nnt_ctx_options *opts)
{
    nnt_ctx_options defaults;
    nnt_ctx_options_init(&defaults);
    /* 0.2 ended the structure before mpi and distribution */
    return nnt_read_options("nnt_ctx_create", user, &defaults, opts, sizeof *opts,
                            offsetof(nnt_ctx_options, mpi),
                            "initialise them with NNT_CTX_OPTIONS_INIT or "
                            "nnt_ctx_options_init");
}

static int sched_exists(const char *name)
{
    struct starpu_sched_policy **policy = starpu_sched_get_predefined_policies();
    for (; policy && *policy; policy++)
        if (strcmp((*policy)->policy_name, name) == 0)
            return 1;
    return 0;
}

static int check_dir(const char *what, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: %s '%s': %s", what, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: %s '%s' is not a directory", what, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: %s '%s' is not writable", what, dir);
    return NNT_OK;
}

/* A swap larger than the free space of its file system would fail in the middle of a run,
 * when StarPU writes a tile there (StarPU's disk backend aborts on a failed write), so it is
 * refused here with the numbers. Space taken later by other programs is not foreseen. */
static int check_free_space(const char *dir, int64_t swap_mib)
{
    struct statvfs fs;
    if (statvfs(dir, &fs) != 0)
        return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: swap directory '%s': %s", dir,
                        strerror(errno));
    double free_mib = (double)fs.f_bavail * (double)fs.f_frsize / (1024.0 * 1024.0);
    if ((double)swap_mib > free_mib)
        return nnt_fail(NULL, NNT_E_NOMEM, "nnt_ctx_create: swap_mib %lld is more than the "
                        "%.0f MiB free on the file system of '%s'", (long long)swap_mib,
                        free_mib, dir);
    return NNT_OK;
}

static int validate_options(const nnt_ctx_options *o)
{
    if (o->ncpus < -1)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: ncpus %d (use -1 for all cores)", o->ncpus);
    if (o->ncuda < -1)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: ncuda %d (use -1 for all GPUs)", o->ncuda);
    if (o->ncpus == 0 && o->ncuda == 0)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: ncpus and ncuda are both 0: no workers");
#ifndef STARPU_USE_CUDA
    if (o->ncuda > 0)
        return nnt_fail(NULL, NNT_E_UNSUPPORTED, "nnt_ctx_create: %d CUDA devices requested but "
                        "StarPU was built without CUDA (configure nnt --with-starpu=PREFIX of a "
                        "CUDA-enabled StarPU)", o->ncuda);
#endif
    if (o->sched && !sched_exists(o->sched))
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: unknown scheduler '%s' (try lws, "
                        "eager, dmda, dmdas)", o->sched);
    if (o->mem_gpu_mib < 0 || o->mem_cpu_mib < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: negative memory budget "
                        "(gpu %lld MiB, cpu %lld MiB)", (long long)o->mem_gpu_mib,
                        (long long)o->mem_cpu_mib);
    if (o->mpi != 0 && o->mpi != 1)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: mpi %d (use 0 or 1)", o->mpi);
    if (o->distribution != NNT_DIST_ROOT && o->distribution != NNT_DIST_SHARDED &&
        o->distribution != NNT_DIST_DATA)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: distribution %d is none of "
                        "NNT_DIST_ROOT (0), NNT_DIST_SHARDED (1), NNT_DIST_DATA (2)",
                        o->distribution);
    if (o->release_weights != 0 && o->release_weights != 1)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: release_weights %d (use 0 or 1)",
                        o->release_weights);
    if (!o->swap_dir && o->swap_mib != 0)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: swap_mib %lld without swap_dir",
                        (long long)o->swap_mib);
    if (o->swap_dir) {   /* last: it looks at the disk */
        if (o->swap_mib * 1024 * 1024 < STARPU_DISK_SIZE_MIN)
            return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: swap_mib %lld is below the "
                            "minimum of %d MiB", (long long)o->swap_mib,
                            STARPU_DISK_SIZE_MIN / (1024 * 1024));
        NNT_TRY(check_dir("swap directory", o->swap_dir));
        return check_free_space(o->swap_dir, o->swap_mib);
    }
    return NNT_OK;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: bad directory path '%s'", path);
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: cannot create '%s': %s", buf,
                                strerror(errno));
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    return NNT_OK;
}

/* Memory budgets reach StarPU through environment variables read at start-up, and so do
 * its verbosity (STARPU_SILENT) and the topology it loads (HWLOC_XMLFILE, put back right
 * after start-up). The values they had before are put back when the context goes, so a
 * later context in the same process does not inherit a budget it did not ask for. */
enum { LIMIT_CUDA, LIMIT_CPU, SILENT, NOBIND, MPI_NOBIND, RANK_HOME, HWLOC_XML, HWLOC_THIS,
       NVARS };
static const char *const limit_vars[NVARS] = {"STARPU_LIMIT_CUDA_MEM", "STARPU_LIMIT_CPU_MEM",
                                              "STARPU_SILENT", "STARPU_WORKERS_NOBIND",
                                              "STARPU_MPI_NOBIND", "STARPU_HOME",
                                              "HWLOC_XMLFILE", "HWLOC_THISSYSTEM"};
static struct {
    int saved;       /* this context set the variable       */
    char *previous;  /* its earlier value, NULL when unset  */
} limit_saved[NVARS];

static void set_var(int which, const char *value)
{
    const char *previous = getenv(limit_vars[which]);
    limit_saved[which].saved = 1;
    limit_saved[which].previous = previous ? strdup(previous) : NULL;
    setenv(limit_vars[which], value, 1);
}

static void set_limit(int which, int64_t mib)
{
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)mib);
    set_var(which, num);
}

/* The variable's earlier value back, if this context set it. */
static void restore_var(int which)
{
    if (!limit_saved[which].saved)
        return;
    if (limit_saved[which].previous)
        setenv(limit_vars[which], limit_saved[which].previous, 1);
    else
        unsetenv(limit_vars[which]);
    free(limit_saved[which].previous);
    limit_saved[which].previous = NULL;
    limit_saved[which].saved = 0;
}

static void restore_limits(void)
{
    for (int i = 0; i < NVARS; i++)
        restore_var(i);
}

int64_t nnt_default_gpu_budget_mib(int64_t total_mib)
{
    int64_t reserve = total_mib / 16 > 1536 ? total_mib / 16 : 1536;
    return total_mib > 2 * reserve ? total_mib - reserve : total_mib / 2;
}

#ifdef NNT_CUDA_CODELETS
/* Memory of the smallest visible GPU in MiB, 0 if none can be asked (no context created). */
static int64_t smallest_gpu_mib(void)
{
    int count = 0;
    int64_t smallest = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess)
        count = 0;
    for (int d = 0; d < count; d++) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, d) != cudaSuccess)
            continue;
        int64_t mib = (int64_t)(prop.totalGlobalMem >> 20);
        if (smallest == 0 || mib < smallest)
            smallest = mib;
    }
    (void)cudaGetLastError();   /* a failed query must not linger in the error slot */
    return smallest;
}
#endif

/* StarPU reads its model directory and memory limits from the environment at start-up.
 * rank >= 0 (one rank of several): the models go to a subdirectory per rank (ranks sharing a
 * directory lose samples and race on the bus calibration), and workers and the MPI thread
 * are not bound to cores unless the user binds them (StarPU would pin every rank's threads
 * to the same cores). */
static int configure_environment(const nnt_ctx_options *o, int rank)
{
    char path[4096], rank_path[4200];
    const char *dir = o->perfmodel_dir;
    if (!dir && !getenv("STARPU_HOME")) {
        const char *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (cache && *cache)
            snprintf(path, sizeof path, "%s/nnt", cache);
        else if (home && *home)
            snprintf(path, sizeof path, "%s/.cache/nnt", home);
        else
            snprintf(path, sizeof path, "/tmp/nnt-%ld", (long)getuid());
        dir = path;
    }
    if (!dir && rank >= 0)
        dir = getenv("STARPU_HOME");
    if (dir && rank >= 0) {
        snprintf(rank_path, sizeof rank_path, "%s/rank%d", dir, rank);
        dir = rank_path;
    }
    if (rank >= 0 && !getenv(limit_vars[NOBIND]) && !getenv("STARPU_WORKERS_CPUID"))
        set_limit(NOBIND, 1);
    /* likewise StarPU-MPI's communication thread (twice as fast with 2 ranks on 2 cores) */
    if (rank >= 0 && !getenv(limit_vars[MPI_NOBIND]) && !getenv("STARPU_MPI_THREAD_CPUID") &&
        !getenv("STARPU_MPI_THREAD_COREID"))
        set_limit(MPI_NOBIND, 1);
    if (dir) {
        int rc = make_dirs(dir);
        if (rc == 0)
            rc = check_dir("performance-model directory", dir);
        if (rc)
            return rc;
        if (rank >= 0)
            set_var(RANK_HOME, dir);   /* put back at destroy: no rank0/rank0 next time */
        else
            setenv("STARPU_HOME", dir, 1);
    }
    if (o->mem_gpu_mib > 0) {
        set_limit(0, o->mem_gpu_mib);
    } else {
#ifdef NNT_CUDA_CODELETS
        /* StarPU's own default is the whole card, but it does not count the CUDA context,
         * the cuBLAS / cuBLASLt workspaces or nnt's GEMM operand scratch */
        int64_t total = o->ncuda != 0 && !getenv(limit_vars[0]) ? smallest_gpu_mib() : 0;
        if (total > 0)
            set_limit(0, nnt_default_gpu_budget_mib(total));
#endif
    }
    if (o->mem_cpu_mib > 0)
        set_limit(1, o->mem_cpu_mib);
    /* StarPU's own warnings (a slow transfer, memory purged under a budget) are expected
     * under a budget and drown nnt's messages: shown at the debug log level only, unless the
     * user set STARPU_SILENT */
    int level = NNT_LOG_WARN;
    nnt_log_get_level(&level);
    if (level < NNT_LOG_DEBUG && !getenv(limit_vars[SILENT]))
        set_limit(SILENT, 1);
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
static int idle_yield;       /* chosen by choose_idle for the context being started */

static unsigned yield_when_idle(void *arg)
{
    (void)arg;
    sched_yield();
    return 1;   /* a worker that can block may still do so */
}

static int choose_idle(void)
{
    const char *v = getenv("NNT_WORKER_IDLE");
    if (v && !*v)
        v = NULL;   /* set but empty: the default, as for NNT_GEMM */
    if (v && strcmp(v, "yield") && strcmp(v, "spin"))
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: NNT_WORKER_IDLE=%s: expected "
                        "'yield' (the default) or 'spin'", v);
    idle_yield = !v || !strcmp(v, "yield");
    return NNT_OK;
}

/* After starpu_init; shutdown_runtime deregisters it */
static void register_idle_hook(void)
{
    if (!idle_yield)
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
    conf.ncpus = o->ncpus;
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
        set_var(HWLOC_XML, topology);
        set_var(HWLOC_THIS, "1");
    }
    rc = mpi ? nnt_mpi_init_runtime(&conf) : starpu_init(&conf);
    if (topology[0]) {
        restore_var(HWLOC_XML);
        restore_var(HWLOC_THIS);
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

static int register_swap(nnt_ctx *ctx, const nnt_ctx_options *o)
{
    starpu_ssize_t bytes = (starpu_ssize_t)o->swap_mib * 1024 * 1024;
    /* Plain read/write. StarPU 1.3's O_DIRECT variant aborts the process on any transfer
     * that is not a multiple of the page size, and tiles (biases, LayerNorm vectors, edge
     * tiles) have arbitrary sizes. The cost: swapped tiles also pass through the page cache,
     * which the kernel gives back under memory pressure. */
    int node = starpu_disk_register(&starpu_disk_unistd_ops, (void *)o->swap_dir, bytes);
    if (node < 0)
        return nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: cannot use '%s' for disk swap",
                        o->swap_dir);
    ctx->disk_node = node;
    return NNT_OK;
}

/* BLIS's kernel set, then the GEMM backend (NNT_GEMM or a feature test), described in
 * ctx->kernels with the elementwise kernels' instruction set (nnt_cpu_isa) and what idle
 * workers do (NNT_WORKER_IDLE); a bad NNT_GEMM or NNT_WORKER_IDLE fails the creation. */
static int choose_kernels(nnt_ctx *ctx)
{
    const char *blis_arch = nnt_cpu_blis_setup();
    char why[200];
    int rc = nnt_cpu_gemm_choose(why, sizeof why);
    if (rc)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: %s", why);
    if ((rc = choose_idle()))
        return rc;
    int dnnl = nnt_cpu_gemm_backend() == NNT_GEMM_ONEDNN;
    char dnnl_desc[64] = "";
    if (dnnl)
        snprintf(dnnl_desc, sizeof dnnl_desc, " (ISA %s, bf16 operands %s)", nnt_cpu_dnnl_isa(),
                 nnt_cpu_dnnl_bf16_native() ? "direct" : "expanded to fp32");
    snprintf(ctx->kernels, sizeof ctx->kernels,
             "CPU GEMM %s%s: %s; BLIS kernels %s (%s); elementwise kernels %s; idle CPU "
             "workers %s", dnnl ? "oneDNN" : "BLIS", dnnl_desc, why, blis_arch,
             nnt_cpu_blis_reason(), nnt_cpu_isa_name(), idle_yield ? "yield" : "spin");
    return NNT_OK;
}

int nnt_ctx_create(const nnt_ctx_options *user_opts, nnt_ctx **out)
{
    nnt_ctx_options opts;
    if (!out)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: output pointer is NULL");
    *out = NULL;
    int rc = read_options(user_opts, &opts);
    if (rc)
        return rc;
    rc = validate_options(&opts);
    int rank = 0, nranks = 1;
    /* this rank's main memory for tiles (its RAM budget, else the machine's); under MPI the
     * smallest rank's */
    int64_t ram_mib = opts.mem_cpu_mib > 0 ? opts.mem_cpu_mib : nnt_host_ram_bytes() >> 20;
    if (opts.mpi)   /* collective: every rank learns whether all can go on */
        rc = nnt_mpi_agree(&opts, rc, &rank, &nranks, &ram_mib);
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
    rc = configure_environment(&opts, opts.mpi && nranks > 1 ? rank : -1);
    if (rc == 0)
        rc = choose_kernels(ctx);   /* before any task runs a GEMM, before workers poll */
    if (rc == 0)
        rc = start_starpu(&opts);
    if (rc) {
        restore_limits();
        pthread_mutex_unlock(&live_lock);
        free(ctx);
        return rc;
    }
    ctx->magic = NNT_CTX_MAGIC;
    ctx->disk_node = -1;
    ctx->mpi = opts.mpi;
    ctx->rank = rank;
    ctx->nranks = nranks;
    ctx->distribution = opts.distribution;
    /* only where tiles have other owners than the rank using them */
    ctx->release_weights = opts.release_weights && opts.mpi && nranks > 1 &&
                           opts.distribution != NNT_DIST_ROOT;
    ctx->min_rank_ram = ram_mib << 20;
    ctx->next_tag = 1;
    pthread_mutex_init(&ctx->lock, NULL);
    start_cuda_libraries();
    ctx->ncpus = (int)starpu_cpu_worker_get_count();
    ctx->ncuda = (int)starpu_cuda_worker_get_count();
    struct starpu_sched_policy *policy = starpu_sched_ctx_get_sched_policy(0);
    ctx->sched = policy && policy->policy_name ? policy->policy_name : "unknown";
    if (opts.swap_dir && (rc = register_swap(ctx, &opts)) != 0) {
        stop_cuda_libraries();
        shutdown_runtime(ctx->mpi);
        free_cpu_scratch();
        restore_limits();
        pthread_mutex_destroy(&ctx->lock);
        pthread_mutex_unlock(&live_lock);
        free(ctx);
        return rc;
    }
    const char *why_not = NULL;
    ctx->pack_b = nnt_gemm_packs(ctx, &why_not);
    if (nnt_cpu_gemm_backend() == NNT_GEMM_ONEDNN) {   /* what oneDNN's products do with B */
        size_t len = strlen(ctx->kernels), room = sizeof ctx->kernels - len;
        if (ctx->pack_b)
            snprintf(ctx->kernels + len, room, "; B tiles shared by %d+ row tiles packed once "
                     "a product", NNT_GEMM_PACK_MIN_READERS);
        else
            snprintf(ctx->kernels + len, room, "; B tiles shared by %d+ row tiles not packed "
                     "(%s)", NNT_GEMM_PACK_MIN_READERS, why_not);
    }
    /* Ours or the user's; without one StarPU still limits itself to the memory it found
     * available at start-up, and spins forever when tiles exceed that: use it too. */
    const char *limit = getenv("STARPU_LIMIT_CPU_MEM");
    starpu_ssize_t starpu_total = starpu_memory_get_total(STARPU_MAIN_RAM);
    ctx->ram_budget = limit ? atoll(limit) * 1024 * 1024 : starpu_total > 0 ? starpu_total : 0;
    if (starpu_total > 0 && ctx->ram_budget > starpu_total)
        ctx->ram_budget = starpu_total;   /* StarPU holds to the smaller of the two */
    ctx->ram_budget_default = !limit && ctx->ram_budget > 0;
    ctx->swap_bytes = opts.swap_dir ? opts.swap_mib * 1024 * 1024 : 0;
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

/* Add sign x t's tiles to the context's counts (lock held). */
static void count_tiles(nnt_ctx *ctx, const nnt_tensor *t, int sign)
{
    int64_t bytes = nnt_tensor_bytes(t);
    ctx->tile_bytes += sign * bytes;
    if (!t->stays && !t->released)
        return;
    *(t->stays ? &ctx->stays_bytes : &ctx->released_bytes) += sign * bytes;
    if (sign > 0 && bytes > ctx->largest_stays)
        ctx->largest_stays = bytes;
    for (int64_t i = 0; i < t->ntiles; i++) {
        int owner = t->tiles[i].owner;
        *(t->stays ? &ctx->ranks[owner].stays : &ctx->ranks[owner].released) +=
            sign * nnt_tensor_tile_bytes(t, i);
    }
}

/* The most bytes of tiles one rank may come to hold (lock held): in one process, or when
 * rank 0 owns everything, all of them; else, for the rank where it is largest, its own tiles
 * of the tensors that stay on their owners (optimizer moments; gradients under
 * NNT_DIST_SHARDED) or that the ranks release after use (weights under release_weights),
 * every tile of the others (it may receive a copy of any tile it reads: weights, rows), the
 * largest tensor that stays or is released (a host read brings one whole to every rank),
 * and the weights a forward or backward gathers at once (the release window; at most the
 * released tiles other ranks own). */
static int64_t most_held(const nnt_ctx *ctx)
{
    if (!ctx->mpi || ctx->nranks < 2 || ctx->distribution == NNT_DIST_ROOT)
        return ctx->tile_bytes;
    int64_t most = 0;
    for (int r = 0; r < ctx->nranks; r++) {
        int64_t others = ctx->released_bytes - ctx->ranks[r].released;   /* it may receive */
        int64_t held = ctx->ranks[r].stays + ctx->ranks[r].released +
                       (ctx->release_window < others ? ctx->release_window : others);
        if (held > most)
            most = held;
    }
    return ctx->tile_bytes - ctx->stays_bytes - ctx->released_bytes + most +
           ctx->largest_stays;
}

/* "" in one process; else what most_held counted, for a message */
static const char *held_counted(const nnt_ctx *ctx)
{
    if (most_held(ctx) == ctx->tile_bytes)
        return ctx->mpi ? ", every rank's tiles counted" : "";
    if (ctx->release_weights)
        return ctx->distribution == NNT_DIST_SHARDED
                   ? ", on the rank that may hold the most: its share of the weights, "
                     "gradients and optimizer moments, the weights of two layers gathered "
                     "at a time, every other tile it may read"
                   : ", on the rank that may hold the most: its share of the weights and "
                     "optimizer moments, the weights of two layers gathered at a time, every "
                     "other tile it may read";
    return ctx->distribution == NNT_DIST_SHARDED
               ? ", on the rank that may hold the most: its share of the gradients and "
                 "optimizer moments, every other tile it may read"
               : ", on the rank that may hold the most: its share of the optimizer moments, "
                 "every other tile it may read";
}

/* The memory limit the budget checks hold to: the swap's size, else the RAM budget. */
static int64_t held_limit(const nnt_ctx *ctx)
{
    return ctx->swap_bytes > 0 ? ctx->swap_bytes : ctx->ram_budget;
}

static int over_budget(nnt_ctx *ctx, const char *fn, double more, double already)
{
    const double mib = 1024.0 * 1024.0;
    return nnt_fail(ctx, NNT_E_NOMEM, "%s: %.1f MiB more of tensors (%.1f MiB already%s) "
                    "exceed the %s of %.0f MiB; give a %s", fn, more / mib, already / mib,
                    held_counted(ctx),
                    ctx->swap_bytes > 0 ? "disk swap"
                    : ctx->ram_budget_default ? "default RAM budget (the memory available "
                                                "when the context started)"
                                              : "RAM budget",
                    (double)held_limit(ctx) / mib,
                    ctx->swap_bytes > 0 ? "larger swap_mib" : "larger mem_cpu_mib or a "
                    "swap_dir");
}

int nnt_ctx_set_release_window(nnt_ctx *ctx, int64_t bytes, const char *fn)
{
    pthread_mutex_lock(&ctx->lock);
    int64_t before = most_held(ctx), old = ctx->release_window;
    ctx->release_window = bytes;
    int64_t after = most_held(ctx);
    if (ctx->ram_budget > 0 && bytes > old && after > held_limit(ctx)) {
        ctx->release_window = old;
        pthread_mutex_unlock(&ctx->lock);
        return over_budget(ctx, fn, (double)(after - before), (double)before);
    }
    pthread_mutex_unlock(&ctx->lock);
    return NNT_OK;
}

int nnt_ctx_add_tensor(nnt_ctx *ctx, nnt_tensor *t, const char *fn)
{
    pthread_mutex_lock(&ctx->lock);
    int64_t before = most_held(ctx);
    count_tiles(ctx, t, 1);
    int64_t after = most_held(ctx);
    if (ctx->ram_budget > 0 && after > held_limit(ctx)) {
        count_tiles(ctx, t, -1);
        pthread_mutex_unlock(&ctx->lock);
        /* StarPU would spin forever looking for memory to free: refuse instead. Under MPI
         * every rank takes the same decision (it counts every rank's tiles alike) */
        return over_budget(ctx, fn, (double)(after - before), (double)before);
    }
    t->prev = NULL;
    t->next = ctx->tensors;
    if (ctx->tensors)
        ctx->tensors->prev = t;
    ctx->tensors = t;
    pthread_mutex_unlock(&ctx->lock);
    return NNT_OK;
}

void nnt_ctx_remove_tensor(nnt_ctx *ctx, nnt_tensor *t)
{
    pthread_mutex_lock(&ctx->lock);
    count_tiles(ctx, t, -1);
    ctx->owned_bytes -= t->owned_bytes;
    if (t->prev)
        t->prev->next = t->next;
    else
        ctx->tensors = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->prev = t->next = NULL;
    pthread_mutex_unlock(&ctx->lock);
}

/* Release the tiles of every tensor still alive; the handles stay valid but unusable. */
static void orphan_tensors(nnt_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    nnt_tensor *t = ctx->tensors;
    ctx->tensors = NULL;
    ctx->tile_bytes = 0;
    ctx->stays_bytes = 0;
    ctx->released_bytes = 0;
    ctx->release_window = 0;
    ctx->owned_bytes = 0;
    pthread_mutex_unlock(&ctx->lock);
    while (t) {
        nnt_tensor *next = t->next;
        for (int64_t i = 0; i < t->ntiles; i++)
            starpu_data_unregister_no_coherency(t->tiles[i].handle);
        free(t->tiles);
        t->tiles = NULL;
        t->ctx = NULL;
        t->prev = t->next = NULL;
        t = next;
    }
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
    nnt_stats_ctx_stop(ctx);
    orphan_tensors(ctx);
    pthread_mutex_lock(&live_lock);
    live_ctx = NULL;
    pthread_mutex_unlock(&live_lock);
    stop_cuda_libraries();
    shutdown_runtime(ctx->mpi);
    free_cpu_scratch();
    restore_limits();
    nnt_io_set_writer(1);
    pthread_mutex_destroy(&ctx->lock);
    ctx->magic = 0;
    free(ctx);
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
