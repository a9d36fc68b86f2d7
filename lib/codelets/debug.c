/* SPDX-License-Identifier: MIT */
/* Task checks for finding ordering bugs (NNT_DEBUG_TASKS=1), and schedule jitter
 * (NNT_DEBUG_JITTER=MICROSECONDS) to make rare interleavings common. Off unless asked: a
 * developer's tool and a test mode (tests/check_debug_tasks.sh), not for production runs.
 *
 * With NNT_DEBUG_TASKS=1 every task runs on a CPU worker through a wrapper around its
 * codelet's CPU function that
 *   - fills its write-only (W) buffers with a poison (all bits set: NaN floats, -1
 *     integers) before the body: a kernel that reads a buffer it declared W sees the poison;
 *   - checksums its read-only (R) buffers before and after the body: a kernel that writes a
 *     buffer it declared R is named;
 *   - records the memory of its buffers while it runs: two tasks running at once whose
 *     buffers overlap, one of them writing, are named (two handles sharing memory: StarPU
 *     orders tasks by handle, so nothing orders them);
 *   - checks the order StarPU ran it in against the order it was submitted in: when it
 *     starts, every write of each of its handles submitted before it has run and none after
 *     it, and if it writes, every read submitted before it has run (per-handle counts of
 *     the accesses submitted and run; a host write, nnt_handle_written outside a task,
 *     counts as run: it waited for the tasks before it);
 *   - counts its runs: a task run twice is named.
 * A fault is logged as the task's error (nnt_task_error: nnt_ctx_wait fails after it) and
 * counted; nnt_ctx_destroy then fails (nnt_debug_tasks_faults). NNT_DEBUG_JITTER sleeps a
 * random time up to the given microseconds inside the wrapper (the buffers recorded), so
 * tasks that wrongly overlap are likely to be caught running together; it implies the
 * wrapper. CUDA codelets are not checked: under the wrapper every task runs on the CPU. */
#include "../internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CODELETS 256
#define MAX_ACTIVE 4096   /* buffers of the tasks running at once */

struct twin {
    const struct starpu_codelet *orig;
    struct starpu_codelet *twin;
};

/* Per handle: the writes and reads submitted (main thread) and run (workers; atomic). */
struct handle_counts {
    starpu_data_handle_t handle;
    uint64_t writes, reads;
    uint64_t writes_run, reads_run;
};

/* A task's buffer: its access (decoded once, at submission) and what the task expects of
 * its handle when it starts. */
struct expect {
    struct handle_counts *counts;
    uint64_t writes;   /* writes run: those submitted before it */
    uint64_t reads;    /* reads run at least (a writer: those submitted before it) */
    int write, read;   /* the task writes (W, RW), only reads (R)                   */
    int poison;        /* content undefined before the body (W, SCRATCH)            */
    int changes;       /* the body may change it (W, RW, SCRATCH)                   */
};

struct task_info {
    const struct starpu_codelet *orig;
    int runs;   /* atomic */
    int nbuf;
    struct expect expect[];
};

struct active {
    uintptr_t lo, hi;
    int write;
    const struct task_info *task;
    int buf;
};

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int checks_on;
static unsigned jitter_us;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct twin twins[MAX_CODELETS];
static int ntwins;
static struct active active[MAX_ACTIVE];
static int nactive;
static unsigned long faults;   /* atomic */
#define COUNT_SLOTS (1u << 20)      /* handles alive at once, at most (open addressing) */
static struct handle_counts *counts;

static void read_env(void)
{
    const char *c = getenv("NNT_DEBUG_TASKS"), *j = getenv("NNT_DEBUG_JITTER");
    jitter_us = j && *j ? (unsigned)strtoul(j, NULL, 10) : 0;
    checks_on = (c && strcmp(c, "1") == 0) || jitter_us > 0;
}

int nnt_debug_tasks_on(void)
{
    pthread_once(&env_once, read_env);
    return checks_on;
}

unsigned long nnt_debug_tasks_faults(void)
{
    return __atomic_load_n(&faults, __ATOMIC_RELAXED);
}

static const char *name_of(const struct task_info *info)
{
    return info->orig->name ? info->orig->name : "(unnamed codelet)";
}

static void fault(const struct task_info *info, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    __atomic_add_fetch(&faults, 1, __ATOMIC_RELAXED);
    nnt_task_error(name_of(info), "NNT_DEBUG_TASKS: %s", msg);
}

/* FNV-1a over 8-byte words, then the tail bytes */
static uint64_t checksum(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ULL;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* Record buffer ranges of a task starting; name any overlap with a running task's buffer
 * where either writes. */
static void enter(const struct task_info *info, const uintptr_t *lo, const uintptr_t *hi)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < info->nbuf; i++) {
        int write = info->expect[i].changes;
        for (int a = 0; a < nactive; a++) {
            const struct active *o = &active[a];
            if (o->task != info && (write || o->write) && lo[i] < o->hi && o->lo < hi[i])
                fault(info, "buffer %d overlaps buffer %d of a %s task running at the same "
                      "time, one of them writing: two handles share memory", i, o->buf,
                      name_of(o->task));
        }
        if (nactive < MAX_ACTIVE && hi[i] > lo[i])
            active[nactive++] = (struct active){lo[i], hi[i], write, info, i};
    }
    pthread_mutex_unlock(&lock);
}

static void leave(const struct task_info *info)
{
    pthread_mutex_lock(&lock);
    for (int a = 0; a < nactive;)
        if (active[a].task == info)
            active[a] = active[--nactive];
        else
            a++;
    pthread_mutex_unlock(&lock);
}

static void jitter(void)
{
    static __thread unsigned seed;
    if (!seed)
        seed = (unsigned)(uintptr_t)&seed ^ (unsigned)time(NULL);
    unsigned us = (unsigned)rand_r(&seed) % (jitter_us + 1);
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
}

/* The counts of h (main thread, at submission). A handle registered at the address of a
 * freed one (its version below the counted writes) starts anew; writes outside tasks (host
 * copies) since the last submission count as run. NULL when the table is full. */
static struct handle_counts *counts_of(starpu_data_handle_t h, uint64_t version)
{
    if (!counts && !(counts = calloc(COUNT_SLOTS, sizeof *counts)))
        return NULL;
    uintptr_t v = (uintptr_t)h >> 4;
    size_t at = (size_t)((v ^ (v >> 20)) & (COUNT_SLOTS - 1));
    for (size_t n = 0; n < COUNT_SLOTS; n++, at = (at + 1) & (COUNT_SLOTS - 1)) {
        struct handle_counts *c = &counts[at];
        if (c->handle && c->handle != h)
            continue;
        if (!c->handle || version < c->writes) {   /* new, or a new handle at this address */
            c->handle = h;
            c->writes = version;
            c->reads = 0;
            __atomic_store_n(&c->writes_run, version, __ATOMIC_RELAXED);
            __atomic_store_n(&c->reads_run, 0, __ATOMIC_RELAXED);
        } else if (version > c->writes) {   /* host writes: done */
            __atomic_add_fetch(&c->writes_run, version - c->writes, __ATOMIC_RELAXED);
            c->writes = version;
        }
        return c;
    }
    return NULL;
}

/* What the task expects when it starts (nnt_submit has counted its writes in the handles'
 * versions already). */
static void expect_of(struct starpu_task *task, struct task_info *info)
{
    for (int i = 0; i < info->nbuf; i++) {
        struct expect *e = &info->expect[i];
        enum starpu_data_access_mode mode = STARPU_TASK_GET_MODE(task, i) & ~STARPU_COMMUTE;
        starpu_data_handle_t h = STARPU_TASK_GET_HANDLE(task, i);
        e->write = (mode & STARPU_W) != 0;
        e->read = (mode & STARPU_R) != 0 && !e->write;
        e->poison = mode == STARPU_W || mode == STARPU_SCRATCH;
        e->changes = e->write || mode == STARPU_SCRATCH;
        e->counts = counts_of(h, nnt_handle_version(h) - (uint64_t)e->write);
        if (!e->counts || mode == STARPU_SCRATCH || mode == STARPU_REDUX)
            continue;
        e->writes = e->counts->writes;
        e->reads = e->counts->reads;
        e->counts->writes += e->write;
        e->counts->reads += e->read;
    }
}

static void check_order(const struct task_info *info)
{
    for (int i = 0; i < info->nbuf; i++) {
        const struct expect *e = &info->expect[i];
        if (!e->counts || (!e->write && !e->read))
            continue;
        uint64_t w = __atomic_load_n(&e->counts->writes_run, __ATOMIC_ACQUIRE);
        uint64_t r = __atomic_load_n(&e->counts->reads_run, __ATOMIC_ACQUIRE);
        if (w != e->writes)
            fault(info, "buffer %d: the task starts after %llu writes of its handle ran, but "
                  "%llu were submitted before it: StarPU ran the tasks out of order", i,
                  (unsigned long long)w, (unsigned long long)e->writes);
        if (e->write && r < e->reads)
            fault(info, "buffer %d: the task writes its handle after %llu reads of it ran, "
                  "but %llu were submitted before it", i, (unsigned long long)r,
                  (unsigned long long)e->reads);
    }
}

static void count_run(const struct task_info *info)
{
    for (int i = 0; i < info->nbuf; i++) {
        const struct expect *e = &info->expect[i];
        if (e->counts && e->write)
            __atomic_add_fetch(&e->counts->writes_run, 1, __ATOMIC_RELEASE);
        else if (e->counts && e->read)
            __atomic_add_fetch(&e->counts->reads_run, 1, __ATOMIC_RELEASE);
    }
}

/* The CPU function of every checked codelet. */
static void checked_run(void *buffers[], void *cl_arg)
{
    struct starpu_task *task = starpu_task_get_current();
    struct task_info *info = task->prologue_callback_pop_arg;
    int nbuf = info->nbuf;
    uintptr_t lo[nbuf > 0 ? nbuf : 1], hi[nbuf > 0 ? nbuf : 1];
    uint64_t sum[nbuf > 0 ? nbuf : 1];
    if (__atomic_add_fetch(&info->runs, 1, __ATOMIC_RELAXED) > 1)
        fault(info, "the task ran %d times", info->runs);
    for (int i = 0; i < nbuf; i++) {
        const struct expect *e = &info->expect[i];
        /* every nnt buffer interface (vector, variable, the counted tiles) starts with the
           interface id then the pointer, as StarPU's vector interface */
        lo[i] = ((struct starpu_vector_interface *)buffers[i])->ptr;
        hi[i] = lo[i] + starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i));
        if (e->poison)
            memset((void *)lo[i], 0xff, hi[i] - lo[i]);
        sum[i] = e->changes ? 0 : checksum((const unsigned char *)lo[i], hi[i] - lo[i]);
    }
    check_order(info);
    enter(info, lo, hi);
    if (jitter_us)
        jitter();
    info->orig->cpu_funcs[0](buffers, cl_arg);
    if (jitter_us)
        jitter();
    leave(info);
    count_run(info);
    for (int i = 0; i < nbuf; i++)
        if (!info->expect[i].changes && checksum((const unsigned char *)lo[i], hi[i] - lo[i]) != sum[i])
            fault(info, "the task wrote its buffer %d, which it declares read-only", i);
}

/* The checked twin of cl: its copy running checked_run on CPU workers only. */
static struct starpu_codelet *twin_of(struct starpu_codelet *cl)
{
    struct starpu_codelet *t = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < ntwins && !t; i++)
        if (twins[i].orig == cl)
            t = twins[i].twin;
    if (!t && ntwins < MAX_CODELETS && (t = malloc(sizeof *t))) {
        *t = *cl;
        memset(t->cpu_funcs, 0, sizeof t->cpu_funcs);
        memset(t->cpu_funcs_name, 0, sizeof t->cpu_funcs_name);
        memset(t->cuda_funcs, 0, sizeof t->cuda_funcs);
        memset(t->cuda_flags, 0, sizeof t->cuda_flags);
        t->cpu_funcs[0] = checked_run;
        t->where = STARPU_CPU;
        twins[ntwins++] = (struct twin){cl, t};
    }
    pthread_mutex_unlock(&lock);
    return t;
}

int nnt_debug_task_wrap(struct starpu_task *task)
{
    struct starpu_codelet *cl = task->cl;
    if (!nnt_debug_tasks_on() || !cl || !cl->cpu_funcs[0])
        return 0;
    int nbuf = STARPU_TASK_GET_NBUFFERS(task);
    struct task_info *info = calloc(1, sizeof *info + (size_t)nbuf * sizeof info->expect[0]);
    struct starpu_codelet *t = info ? twin_of(cl) : NULL;
    if (!t) {
        free(info);
        return -1;
    }
    info->orig = cl;
    info->nbuf = nbuf;
    expect_of(task, info);
    task->cl = t;
    task->where = STARPU_CPU;
    task->prologue_callback_pop_arg = info;
    task->prologue_callback_pop_arg_free = 1;
    return 0;
}
