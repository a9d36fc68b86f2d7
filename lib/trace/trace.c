/* SPDX-License-Identifier: MIT */
/* Task statistics, tracing and memory statistics of the live context.
 *
 * StarPU's task profiling is switched on when the context starts (nnt_stats_ctx_start), and
 * nnt_submit gives every task a completion callback (nnt_stats_task_hook). The callback runs
 * on the worker thread after the task body; from task->profiling_info it
 *   - adds the time the worker spent fetching the task's input data (acquire_data_start_time
 *     to acquire_data_end_time) to the transfer wait of nnt_ctx_mem_stats,
 *   - samples the memory used on every node for the peaks of nnt_ctx_mem_stats,
 *   - counts the task and its body's time (nnt_stats_tasks),
 *   - while a trace is on, appends a record (worker, codelet, data wait, start, end).
 * One context is live per process (lib/ctx.c), so the state is this file's. */
#include "../internal.h"
#include "../io/io.h"
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct node_peak {
    int64_t peak;                 /* most used bytes seen since create / the last reset   */
} node_peak;

static struct {
    pthread_mutex_t lock;         /* guards everything below                              */
    int on;                       /* a context is live                                    */
    int tracing;                  /* 1 after nnt_trace_start, 2 while nnt_trace_stop waits */
    int64_t trace_t0;             /* nnt_trace_start's time on the tasks' profiling clock
                                     (ns): the tasks submitted from then on are recorded   */
    nnt_trace_rec *recs;          /* (nrecs) of the trace in progress                     */
    size_t nrecs, cap;
    int oom;                      /* a record could not be stored                         */
    node_peak nodes[NNT_MAX_MEM_NODES];
    int64_t bytes_moved;          /* bus counters summed since create / the last reset    */
    int64_t to_disk, from_disk;   /* of them, the buses into and out of a disk node       */
    int64_t to_gpu, from_gpu;     /* and those from the CPU RAM to a GPU and back         */
    int64_t wait_ns;              /* data waits of all tasks since create / the last reset */
    int64_t tasks, task_ns;       /* tasks run and their bodies' time since create / the
                                     last nnt_stats_tasks reset                            */
} st = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int64_t ts_ns(const struct timespec *t)
{
    return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static int mem_node_count(void)
{
    unsigned n = starpu_memory_nodes_get_count();
    return n > NNT_MAX_MEM_NODES ? NNT_MAX_MEM_NODES : (int)n;
}

/* Bytes StarPU's memory manager holds on node (its total minus its available). */
static int64_t node_used(unsigned node)
{
    starpu_ssize_t total = starpu_memory_get_total(node);
    starpu_ssize_t avail = starpu_memory_get_available(node);
    if (total < 0 || avail < 0)
        return 0;
    return (int64_t)(total - avail);
}

/* Update the peaks from the current use (st.lock held). */
static void sample_peaks_locked(void)
{
    int n = mem_node_count();
    for (int i = 0; i < n; i++) {
        int64_t used = node_used((unsigned)i);
        if (used > st.nodes[i].peak)
            st.nodes[i].peak = used;
    }
}

static void add_record_locked(const struct starpu_task *task,
                              const struct starpu_profiling_task_info *p)
{
    if (st.nrecs == st.cap) {
        size_t cap = st.cap ? 2 * st.cap : 4096;
        nnt_trace_rec *grown = realloc(st.recs, cap * sizeof *grown);
        if (!grown) {
            st.oom = 1;
            return;
        }
        st.recs = grown;
        st.cap = cap;
    }
    nnt_trace_rec *r = &st.recs[st.nrecs++];
    r->codelet = task->cl && task->cl->name ? task->cl->name : "(unnamed)";
    r->worker = p->workerid;
    r->start = ts_ns(&p->start_time);
    r->end = ts_ns(&p->end_time);
    r->wait_start = ts_ns(&p->acquire_data_start_time);
    r->wait_end = ts_ns(&p->acquire_data_end_time);
    if (r->wait_start <= 0 || r->wait_end < r->wait_start || r->wait_end > r->start)
        r->wait_start = r->wait_end = r->start;   /* not measured: no wait drawn */
}

/* Completion callback of every task submitted by nnt_submit (a worker thread). */
static void task_done(void *arg)
{
    const struct starpu_task *task = arg;
    const struct starpu_profiling_task_info *p = task->profiling_info;
    if (!p)
        return;   /* submitted while profiling was off */
    int64_t wait = ts_ns(&p->acquire_data_end_time) - ts_ns(&p->acquire_data_start_time);
    pthread_mutex_lock(&st.lock);
    if (st.on) {
        if (wait > 0)
            st.wait_ns += wait;
        int64_t body = ts_ns(&p->end_time) - ts_ns(&p->start_time);
        st.tasks++;
        st.task_ns += body > 0 ? body : 0;
        sample_peaks_locked();
        /* a task submitted before the trace started is not in it, though it may run, or
         * its callback may, after the start (a host read of a task's data can return
         * before its callback has run) */
        if (st.tracing && ts_ns(&p->submit_time) >= st.trace_t0)
            add_record_locked(task, p);
    }
    pthread_mutex_unlock(&st.lock);
}

void nnt_stats_task_hook(struct starpu_task *task)
{
    task->callback_func = task_done;
    task->callback_arg = task;
}

static void reset_counters_locked(void)
{
    int n = mem_node_count();
    for (int i = 0; i < NNT_MAX_MEM_NODES; i++)
        st.nodes[i].peak = i < n ? node_used((unsigned)i) : 0;
    st.bytes_moved = 0;
    st.to_disk = st.from_disk = 0;
    st.to_gpu = st.from_gpu = 0;
    st.wait_ns = 0;
}

static void free_trace_locked(void)
{
    free(st.recs);
    st.recs = NULL;
    st.nrecs = st.cap = 0;
    st.oom = 0;
    st.tracing = 0;
}

void nnt_stats_ctx_start(nnt_ctx *ctx)
{
    (void)ctx;
    starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
    pthread_mutex_lock(&st.lock);
    free_trace_locked();
    reset_counters_locked();
    st.tasks = st.task_ns = 0;
    nnt_moves_clear();   /* the counts by kind too */
    int nbus = starpu_bus_get_count();
    for (int b = 0; b < nbus; b++) {   /* reading the bus counters zeroes them */
        struct starpu_profiling_bus_info info;
        starpu_bus_get_profiling_info(b, &info);
    }
    st.on = 1;
    pthread_mutex_unlock(&st.lock);
}

void nnt_stats_tasks(int64_t *tasks, int64_t *busy_ns, int reset)
{
    pthread_mutex_lock(&st.lock);
    if (tasks)
        *tasks = st.tasks;
    if (busy_ns)
        *busy_ns = st.task_ns;
    if (reset)
        st.tasks = st.task_ns = 0;
    pthread_mutex_unlock(&st.lock);
}

void nnt_stats_ctx_stop(nnt_ctx *ctx)
{
    (void)ctx;
    nnt_moves_clear();
    pthread_mutex_lock(&st.lock);
    st.on = 0;
    free_trace_locked();
    pthread_mutex_unlock(&st.lock);
}

/* ---- tracing ----------------------------------------------------------------------------- */

int nnt_trace_start(nnt_ctx *ctx)
{
    int rc = nnt_ctx_check(ctx, "nnt_trace_start");
    if (rc)
        return rc;
    /* the user may have switched StarPU's profiling off; tasks need it to be traced */
    if (starpu_profiling_status_get() != STARPU_PROFILING_ENABLE)
        starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
    pthread_mutex_lock(&st.lock);
    int already = st.tracing;
    if (!already) {
        free_trace_locked();
        st.tracing = 1;
        /* StarPU's clock, that of the tasks' profiling times (microseconds) */
        st.trace_t0 = (int64_t)(starpu_timing_now() * 1e3);
    }
    pthread_mutex_unlock(&st.lock);
    if (already)
        return nnt_fail(ctx, NNT_E_STATE, "nnt_trace_start: a trace is already running "
                        "(call nnt_trace_stop first)");
    return NNT_OK;
}

static int by_worker_then_start(const void *pa, const void *pb)
{
    const nnt_trace_rec *a = pa, *b = pb;
    if (a->worker != b->worker)
        return a->worker < b->worker ? -1 : 1;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* This process's worker names into log (the records are already there). */
static int name_workers(nnt_trace_log *log)
{
    int nw = (int)starpu_worker_get_count();
    log->nworkers = nw;
    log->worker_names = calloc(nw > 0 ? (size_t)nw : 1, sizeof *log->worker_names);
    if (!log->worker_names)
        return NNT_E_NOMEM;
    for (int w = 0; w < nw; w++)
        starpu_worker_get_name(w, log->worker_names[w], sizeof log->worker_names[w]);
    return NNT_OK;
}

/* ---- the ranks' records on rank 0 (under MPI) ---------------------------------------------- */

/* A record as it travels: the codelet's name by value. */
typedef struct packed_rec {
    char codelet[48];
    int32_t worker, unused;
    int64_t wait_start, wait_end, start, end;
} packed_rec;

/* What a rank sends: this header, its worker names, its records. */
typedef struct packed_head {
    int64_t nrecs;
    int64_t nworkers;
    int64_t realtime_offset;      /* CLOCK_REALTIME - CLOCK_MONOTONIC (StarPU's clock), ns */
} packed_head;

/* CLOCK_REALTIME - CLOCK_MONOTONIC (StarPU's clock) now, ns */
static int64_t realtime_offset(void)
{
    struct timespec real, mono;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    return ts_ns(&real) - ts_ns(&mono);
}

/* log (records and worker names) as one buffer; NULL when out of memory. */
static char *pack_log(const nnt_trace_log *log, int64_t *len)
{
    packed_head head = {(int64_t)log->n, log->nworkers, realtime_offset()};
    size_t names = (size_t)log->nworkers * sizeof *log->worker_names;
    *len = (int64_t)(sizeof head + names + log->n * sizeof(packed_rec));
    char *buf = calloc(1, (size_t)*len);
    if (!buf)
        return NULL;
    memcpy(buf, &head, sizeof head);
    memcpy(buf + sizeof head, log->worker_names, names);
    packed_rec *out = (packed_rec *)(buf + sizeof head + names);
    for (size_t i = 0; i < log->n; i++) {
        const nnt_trace_rec *r = &log->recs[i];
        snprintf(out[i].codelet, sizeof out[i].codelet, "%s", r->codelet);
        out[i].worker = r->worker;
        out[i].wait_start = r->wait_start, out[i].wait_end = r->wait_end;
        out[i].start = r->start, out[i].end = r->end;
    }
    return buf;
}

/* Rank 0: the gathered buffers as one log, each rank's workers after the previous ranks'
 * ("rank R CPU 0") and its times moved to rank 0's clock through the realtime clock (one
 * clock on one machine; on several, as close as their clocks are synchronised). The
 * records point into all, which must outlive the log. */
static int unpack_logs(nnt_ctx *ctx, char *all, const int64_t *offsets, nnt_trace_log *log)
{
    int64_t nrecs = 0, nworkers = 0, base_offset = 0;
    for (int r = 0; r < ctx->nranks; r++) {
        packed_head head;
        memcpy(&head, all + offsets[r], sizeof head);
        nrecs += head.nrecs, nworkers += head.nworkers;
        if (r == 0)
            base_offset = head.realtime_offset;
    }
    log->recs = malloc((size_t)(nrecs > 0 ? nrecs : 1) * sizeof *log->recs);
    log->worker_names = calloc((size_t)(nworkers > 0 ? nworkers : 1), sizeof *log->worker_names);
    if (!log->recs || !log->worker_names)
        return NNT_E_NOMEM;
    log->n = 0, log->nworkers = 0;
    for (int r = 0; r < ctx->nranks; r++) {
        packed_head head;
        memcpy(&head, all + offsets[r], sizeof head);
        const char (*names)[64] = (const void *)(all + offsets[r] + sizeof head);
        packed_rec *in = (packed_rec *)(all + offsets[r] + sizeof head +
                                        (size_t)head.nworkers * sizeof *names);
        int64_t shift = head.realtime_offset - base_offset;
        for (int64_t i = 0; i < head.nrecs; i++) {
            nnt_trace_rec *o = &log->recs[log->n++];
            in[i].codelet[sizeof in[i].codelet - 1] = 0;
            o->codelet = in[i].codelet;
            o->worker = log->nworkers + in[i].worker;
            o->wait_start = in[i].wait_start + shift, o->wait_end = in[i].wait_end + shift;
            o->start = in[i].start + shift, o->end = in[i].end + shift;
        }
        for (int64_t w = 0; w < head.nworkers; w++)
            snprintf(log->worker_names[log->nworkers + w], sizeof *log->worker_names,
                     "rank %d %.40s", r, names[w]);
        log->nworkers += (int)head.nworkers;
    }
    return NNT_OK;
}

/* Every rank sends its log to rank 0, which replaces its own with all of them (*all keeps
 * the records' codelet names). Every rank takes part, even one whose log is empty. */
static int gather_logs(nnt_ctx *ctx, nnt_trace_log *log, char **all)
{
    int64_t len = 0, offsets[ctx->nranks + 1];
    char *mine = pack_log(log, &len);
    packed_head empty = {0, 0, realtime_offset()};
    int rc = nnt_mpi_gather(ctx, mine ? mine : (char *)&empty, mine ? len : (int64_t)sizeof empty,
                            all, offsets);
    free(mine);
    if (rc)
        return rc;
    if (!mine)
        return nnt_fail(ctx, NNT_E_NOMEM, "nnt_trace_stop: out of host memory");
    if (ctx->rank != 0)
        return NNT_OK;
    free(log->recs);
    free(log->worker_names);
    log->recs = NULL, log->worker_names = NULL;
    if (unpack_logs(ctx, *all, offsets, log))
        return nnt_fail(ctx, NNT_E_NOMEM, "nnt_trace_stop: out of host memory");
    return NNT_OK;
}

static int write_outputs(nnt_ctx *ctx, nnt_trace_log *log, const char *svg_path,
                         const char *table_path)
{
    char err[NNT_IO_ERRLEN];
    if (log->n)
        qsort(log->recs, log->n, sizeof *log->recs, by_worker_then_start);
    int rc = svg_path ? nnt_trace_write_svg(log, svg_path, err, sizeof err) : 0;
    if (rc == 0 && table_path)
        rc = nnt_trace_write_table(log, table_path, err, sizeof err);
    if (rc)
        return nnt_fail(ctx, rc, "nnt_trace_stop: %s", err);
    return NNT_OK;
}

int nnt_trace_stop(nnt_ctx *ctx, const char *svg_path, const char *table_path)
{
    int rc = nnt_ctx_check(ctx, "nnt_trace_stop");
    if (rc)
        return rc;
    pthread_mutex_lock(&st.lock);
    int tracing = st.tracing == 1;
    if (tracing)
        st.tracing = 2;   /* stopping: still recording, but claimed by this call */
    pthread_mutex_unlock(&st.lock);
    if (!tracing)
        return nnt_fail(ctx, NNT_E_STATE, "nnt_trace_stop: no trace is running (call "
                        "nnt_trace_start first)");
    /* every task submitted so far ends, and its callback runs, before this returns */
    starpu_task_wait_for_all();
    nnt_trace_log log = {NULL, 0, 0, NULL};
    pthread_mutex_lock(&st.lock);
    int oom = st.oom;
    log.recs = st.recs;
    log.n = st.nrecs;
    st.recs = NULL;
    free_trace_locked();
    pthread_mutex_unlock(&st.lock);
    char *all = NULL;   // under MPI, on rank 0: every rank's packed records
    if (oom)
        log.n = 0;   /* under MPI it still takes part in the gather, with no records */
    if (name_workers(&log))
        log.nworkers = 0;
    if (ctx->mpi && ctx->nranks > 1)
        rc = gather_logs(ctx, &log, &all);   /* collective: before any return */
    if (oom)
        rc = nnt_fail(ctx, NNT_E_NOMEM, "nnt_trace_stop: out of host memory while recording; "
                      "nothing written");
    else if (!log.worker_names)
        rc = nnt_fail(ctx, NNT_E_NOMEM, "nnt_trace_stop: out of host memory");
    else if (rc == 0 && ctx->rank == 0)   /* under MPI rank 0 writes every rank's */
        rc = write_outputs(ctx, &log, svg_path, table_path);
    free(log.recs);
    free(log.worker_names);
    free(all);
    return rc;
}

/* ---- memory statistics --------------------------------------------------------------------- */

static void node_name(unsigned node, char *name, size_t size)
{
    enum starpu_node_kind kind = starpu_node_get_kind(node);
    int devid = starpu_memory_node_get_devid(node);
    if (kind == STARPU_CPU_RAM)
        snprintf(name, size, devid > 0 ? "RAM%d" : "RAM", devid);
    else if (kind == STARPU_CUDA_RAM)
        snprintf(name, size, "CUDA%d", devid);
    else if (kind == STARPU_DISK_RAM)
        snprintf(name, size, "disk");
    else if (starpu_memory_node_get_name(node, name, size) < 0)
        snprintf(name, size, "node%u", node);
}

/* The limit nnt or the user gave StarPU for node, 0 when none (then StarPU's total is the
 * size of the RAM or GPU memory, which is not a budget); for the main RAM the budget nnt's
 * checks hold to (lib/ctx.c). */
static int64_t node_budget(const nnt_ctx *ctx, unsigned node)
{
    if (node == STARPU_MAIN_RAM)
        return ctx->ram_budget;
    enum starpu_node_kind kind = starpu_node_get_kind(node);
    starpu_ssize_t total = starpu_memory_get_total(node);
    int limited = 0;
    if (kind == STARPU_CPU_RAM)
        limited = ctx->ram_budget > 0;
    else if (kind == STARPU_DISK_RAM)
        limited = 1;
    else if (kind == STARPU_CUDA_RAM) {
        char var[64];
        snprintf(var, sizeof var, "STARPU_LIMIT_CUDA_%d_MEM",
                 starpu_memory_node_get_devid(node));
        limited = getenv("STARPU_LIMIT_CUDA_MEM") || getenv(var);
    }
    return limited && total > 0 ? (int64_t)total : 0;
}

static int node_is(int node, enum starpu_node_kind kind)
{
    return node >= 0 && starpu_node_get_kind((unsigned)node) == kind;
}

/* Add the bus counters (which StarPU zeroes at each read) to bytes_moved, and those of the
 * buses into and out of a disk node to to_disk and from_disk, of the buses from the CPU RAM
 * to a GPU and back to to_gpu and from_gpu (st.lock held). */
static void poll_buses_locked(void)
{
    int nbus = starpu_bus_get_count();
    for (int b = 0; b < nbus; b++) {
        struct starpu_profiling_bus_info info;
        if (starpu_bus_get_profiling_info(b, &info) != 0 || info.transferred_bytes <= 0)
            continue;
        int64_t bytes = (int64_t)info.transferred_bytes;
        int src = starpu_bus_get_src(b), dst = starpu_bus_get_dst(b);
        st.bytes_moved += bytes;
        if (node_is(dst, STARPU_DISK_RAM))
            st.to_disk += bytes;
        if (node_is(src, STARPU_DISK_RAM))
            st.from_disk += bytes;
        if (node_is(src, STARPU_CPU_RAM) && node_is(dst, STARPU_CUDA_RAM))
            st.to_gpu += bytes;
        if (node_is(src, STARPU_CUDA_RAM) && node_is(dst, STARPU_CPU_RAM))
            st.from_gpu += bytes;
    }
}

/* by[NNT_MEM_INTERNAL]: what of total no tensor's kind counted (the library's own tiles);
 * never below 0 (a transfer is counted by kind when it starts, on its bus when it ends). */
static void set_internal(int64_t *by, int64_t total)
{
    int64_t rest = total;
    for (int k = 0; k < NNT_MEM_KINDS; k++)
        rest -= k == NNT_MEM_INTERNAL ? 0 : by[k];
    by[NNT_MEM_INTERNAL] = rest > 0 ? rest : 0;
}

/* Every field of *stats (sizeof *stats). */
static int fill_mem_stats(nnt_ctx *ctx, nnt_mem_stats *stats, int reset)
{
    int n = mem_node_count();
    memset(stats, 0, sizeof *stats);
    stats->size = sizeof *stats;
    stats->nnodes = n;
    pthread_mutex_lock(&st.lock);
    sample_peaks_locked();
    poll_buses_locked();
    for (int i = 0; i < n; i++) {
        node_name((unsigned)i, stats->node[i].name, sizeof stats->node[i].name);
        stats->node[i].used_bytes = node_used((unsigned)i);
        stats->node[i].peak_bytes = st.nodes[i].peak > stats->node[i].used_bytes
                                  ? st.nodes[i].peak : stats->node[i].used_bytes;
        stats->node[i].budget_bytes = node_budget(ctx, (unsigned)i);
    }
    stats->bytes_moved = st.bytes_moved;
    stats->bytes_to_disk = st.to_disk;
    stats->bytes_from_disk = st.from_disk;
    stats->transfer_wait_s = (double)st.wait_ns * 1e-9;
    nnt_moves_read(stats, reset);
    set_internal(stats->to_disk_by, st.to_disk);
    set_internal(stats->from_disk_by, st.from_disk);
    set_internal(stats->to_gpu_by, st.to_gpu);
    set_internal(stats->from_gpu_by, st.from_gpu);
    pthread_mutex_lock(&ctx->lock);
    stats->owned_bytes = ctx->owned_bytes;
    pthread_mutex_unlock(&ctx->lock);
    if (reset)
        reset_counters_locked();
    pthread_mutex_unlock(&st.lock);
    return NNT_OK;
}

int nnt_ctx_mem_stats(nnt_ctx *ctx, nnt_mem_stats *stats, int reset)
{
    int rc = nnt_ctx_check(ctx, "nnt_ctx_mem_stats");
    if (rc)
        return rc;
    if (!stats)
        return nnt_fail(ctx, NNT_E_INVAL, "nnt_ctx_mem_stats: stats is NULL");
    /* a program built against 0.2 has the structure without owned_bytes: it gets that much */
    size_t have = stats->size;
    if ((rc = nnt_check_struct_size(ctx, "nnt_ctx_mem_stats", "stats->size", have,
                                    sizeof *stats, offsetof(nnt_mem_stats, owned_bytes),
                                    "set it to sizeof(nnt_mem_stats)")))
        return rc;
    nnt_mem_stats full;
    rc = fill_mem_stats(ctx, &full, reset);
    memcpy(stats, &full, have);
    stats->size = have;
    return rc;
}
