/* SPDX-License-Identifier: MIT */
/* The environment variables StarPU reads at start-up, set by nnt_ctx_create from its options
 * and put back when the context goes: memory budgets (STARPU_LIMIT_*_MEM, a default GPU
 * budget below the card's size), the performance-model directory (STARPU_HOME, one per MPI
 * rank), worker binding under MPI, STARPU_SILENT, the corrected hwloc topology, the most tasks
 * in flight (STARPU_LIMIT_MAX/MIN_SUBMITTED_TASKS). */
#include "ctx_impl.h"
#include "io/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Memory budgets reach StarPU through environment variables read at start-up, and so do
 * its verbosity (STARPU_SILENT) and the topology it loads (HWLOC_XMLFILE, put back right
 * after start-up). The values they had before are put back when the context goes, so a
 * later context in the same process does not inherit a budget it did not ask for. The
 * variables' indices (LIMIT_CUDA ...): ctx_impl.h. */
static const char *const limit_vars[NVARS] = {"STARPU_LIMIT_CUDA_MEM", "STARPU_LIMIT_CPU_MEM",
                                              "STARPU_SILENT", "STARPU_WORKERS_NOBIND",
                                              "STARPU_MPI_NOBIND", "STARPU_HOME",
                                              "HWLOC_XMLFILE", "HWLOC_THISSYSTEM",
                                              "STARPU_LIMIT_MAX_SUBMITTED_TASKS",
                                              "STARPU_LIMIT_MIN_SUBMITTED_TASKS"};
static struct {
    int saved;       /* this context set the variable       */
    char *previous;  /* its earlier value, NULL when unset  */
} limit_saved[NVARS];

void ctx_set_var(int which, const char *value)
{
    const char *previous = getenv(limit_vars[which]);
    limit_saved[which].saved = 1;
    limit_saved[which].previous = previous ? strdup(previous) : NULL;
    setenv(limit_vars[which], value, 1);
}

static void set_limit(int which, int64_t value)
{
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)value);
    ctx_set_var(which, num);
}

/* The variable's earlier value back, if this context set it. */
void ctx_restore_var(int which)
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

void ctx_restore_limits(void)
{
    for (int i = 0; i < NVARS; i++)
        ctx_restore_var(i);
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
int ctx_configure_environment(const nnt_ctx_options *o, int rank)
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
        int rc = nnt_io_make_dirs(dir) ? nnt_fail(NULL, NNT_E_IO, "nnt_ctx_create: cannot "
                                                  "create '%s': %s", dir, strerror(errno))
                                        : ctx_check_dir("performance-model directory", dir);
        if (rc)
            return rc;
        if (rank >= 0)
            ctx_set_var(RANK_HOME, dir);   /* put back at destroy: no rank0/rank0 next time */
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
    /* The task graph in bounds: StarPU holds about 3 KiB a task submitted and not yet run, and
     * a submission goes on as fast as the program makes tasks, so tiles far too small for
     * their work ran a process out of memory (a training step of 2.4 million tasks, channels
     * in tiles of 1: 7.6 GB of RSS for a model of 0.3 MB). Past NNT_MAX_SUBMITTED tasks in
     * flight a submission waits until fewer than 3/4 of them are (the same step: 2.7 GB, and
     * 1.2x faster); a training step of the usual tilings stays below it. Not under MPI, where
     * StarPU-MPI's own thread submits too; the user's values (either variable) stand. */
    if (!o->mpi && !getenv(limit_vars[MAX_SUBMITTED]) && !getenv(limit_vars[MIN_SUBMITTED])) {
        set_limit(MAX_SUBMITTED, NNT_MAX_SUBMITTED);
        set_limit(MIN_SUBMITTED, NNT_MAX_SUBMITTED / 4 * 3);
    }
    /* StarPU's own warnings (a slow transfer, memory purged under a budget) are expected
     * under a budget and drown nnt's messages: shown at the debug log level only, unless the
     * user set STARPU_SILENT */
    int level = NNT_LOG_WARN;
    nnt_log_get_level(&level);
    if (level < NNT_LOG_DEBUG && !getenv(limit_vars[SILENT]))
        set_limit(SILENT, 1);
    return NNT_OK;
}
