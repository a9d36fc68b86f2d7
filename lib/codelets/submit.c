/* SPDX-License-Identifier: MIT */
/* Task submission shared by the codelets: argument blocks, any number of buffers, and the
 * mapping of StarPU's errors to NNT_E_*. */
#include "../internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What StarPU allocates on a memory node for the buffers of one task at once: the tiles it
 * suballocates (chunked: on a GPU, or in pinned RAM) in whole 32 MiB chunks, plus, when
 * there are larger ones, the 4 empty chunks StarPU may keep, which those cannot use
 * (lib/ctx_alloc.c). */
static int64_t task_need(int nbuf, const struct starpu_data_descr *bufs, int chunked)
{
    int64_t big = 0, small = 0;
    for (int i = 0; i < nbuf; i++) {
        int64_t b = nnt_alloc_bytes((int64_t)starpu_data_get_size(bufs[i].handle), chunked);
        *(chunked && nnt_alloc_suballocated(b) ? &small : &big) += b;
    }
    if (!chunked)
        return big;
    return nnt_alloc_need(big, small, big > 0 ? NNT_STARPU_CHUNKS_KEPT : 0);
}

/* NNT_E_NOMEM when the tiles of one task exceed the RAM budget, or, for a task that may run
 * on a GPU, that GPU's budget: StarPU would wait forever for memory that can never be
 * freed. */
static int check_task_fits(nnt_ctx *ctx, struct starpu_codelet *cl, int nbuf,
                           const struct starpu_data_descr *bufs, int on_gpu)
{
    const double mib = 1048576.0;
    if (ctx->ram_budget > 0) {
        int64_t need = task_need(nbuf, bufs, ctx->ram_chunked);
        if (need > ctx->ram_budget - ctx->ram_kept)
            return nnt_fail(ctx, NNT_E_NOMEM, "%s: one task needs %.2f MiB of tiles%s but the "
                            "RAM budget is %.0f MiB (%.0f MiB of it kept for reusing freed "
                            "tiles); use smaller tiles or a larger mem_cpu_mib", cl->name,
                            (double)need / mib, ctx->ram_chunked ? " (in StarPU's 32 MiB "
                            "chunks of pinned RAM)" : "", (double)ctx->ram_budget / mib,
                            (double)ctx->ram_kept / mib);
    }
    if (on_gpu && ctx->gpu_budget > 0) {
        int64_t need = task_need(nbuf, bufs, 1);
        if (need > ctx->gpu_budget)
            return nnt_fail(ctx, NNT_E_NOMEM, "%s: one task needs %.2f MiB of GPU memory (in "
                            "StarPU's 32 MiB chunks) but the GPU budget is %.0f MiB; use "
                            "smaller tiles or a larger mem_gpu_mib", cl->name,
                            (double)need / mib, (double)ctx->gpu_budget / mib);
    }
    return NNT_OK;
}

/* Whether a CUDA worker can run the task: the codelet has a CUDA implementation and its
 * can_execute (if any) accepts the task there. */
static int cuda_can_run(const nnt_ctx *ctx, struct starpu_codelet *cl, struct starpu_task *task)
{
    if (ctx->ncuda <= 0 || ctx->first_cuda_worker < 0 || !cl->cuda_funcs[0])
        return 0;
    return !cl->can_execute || cl->can_execute((unsigned)ctx->first_cuda_worker, task, 0);
}

/* ctx->task_prio, one less for a task that writes a gradient tile: off the path to the
 * input gradient, which the layers before it wait for (lib/internal.h, task_prio) */
int nnt_task_priority(const nnt_ctx *ctx, int nbuf, const struct starpu_data_descr *bufs)
{
    if (!ctx->task_order)
        return 0;
    for (int i = 0; i < nbuf; i++)
        if ((bufs[i].mode & STARPU_W) && nnt_handle_is_gradient(bufs[i].handle))
            return ctx->task_prio - 1;
    return ctx->task_prio;
}

int nnt_task_writes_host_side(const nnt_ctx *ctx, int nbuf,
                              const struct starpu_data_descr *bufs)
{
    if (!ctx->optim_on_cpu)
        return 0;
    for (int i = 0; i < nbuf; i++)
        if ((bufs[i].mode & STARPU_W) && nnt_handle_is_host_side(bufs[i].handle))
            return 1;
    return 0;
}

int nnt_submit(nnt_ctx *ctx, struct starpu_codelet *cl, int nbuf,
               const struct starpu_data_descr *bufs, const void *args, size_t args_size)
{
    int rc;
    if (ctx->mpi && (rc = check_task_fits(ctx, cl, nbuf, bufs, 0)))   /* no CUDA with MPI */
        return rc;
    for (int i = 0; i < nbuf; i++)
        if (bufs[i].mode & STARPU_W)
            nnt_handle_written(bufs[i].handle);
    void *copy = malloc(args_size ? args_size : 1);   /* freed by StarPU with the task */
    if (!copy)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of host memory", cl->name);
    if (args_size)   /* (args may be NULL without arguments) */
        memcpy(copy, args, args_size);
    if (ctx->mpi) {
        int submitted = 0;
        rc = nnt_mpi_submit(ctx, cl, nbuf, bufs, copy, args_size, &submitted);
        if (submitted == -ENODEV)
            return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: no worker can run this task", cl->name);
        if (rc != 0 || submitted != 0)
            return nnt_fail(ctx, NNT_E_RUNTIME, "%s: task submission over MPI failed: %s",
                            cl->name, strerror(-(rc ? rc : submitted)));
        return NNT_OK;
    }
    /* built, then submitted, so that the statistics hook can give it its callback */
    struct starpu_task *task = starpu_task_build(cl, STARPU_DATA_MODE_ARRAY, bufs, nbuf,
                                                 STARPU_CL_ARGS, copy, args_size, 0);
    if (!task)   /* StarPU destroyed it, and the argument copy with it */
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: no worker can run this task", cl->name);
    /* With CUDA workers a task that one can run goes to them only (NNT_CPU_TASKS, lib/ctx.c):
     * the CPU workers never time GPU-sized tasks for the scheduler's models */
    int on_gpu = cuda_can_run(ctx, cl, task);
    if (on_gpu && cl->cpu_funcs[0] && nnt_task_writes_host_side(ctx, nbuf, bufs)) {
        task->where = STARPU_CPU;
        on_gpu = 0;
    } else if (on_gpu && ctx->cuda_tasks_on_cuda) {
        task->where = STARPU_CUDA;
    }
    if ((rc = check_task_fits(ctx, cl, nbuf, bufs, on_gpu)) != 0) {
        task->destroy = 0;
        starpu_task_destroy(task);   /* and the argument copy with it */
        return rc;
    }
    task->priority = nnt_task_priority(ctx, nbuf, bufs);
    if (nnt_debug_task_wrap(task) != 0) {
        task->destroy = 0;
        starpu_task_destroy(task);
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of host memory (NNT_DEBUG_TASKS)",
                        cl->name);
    }
    nnt_stats_task_hook(task);
    rc = starpu_task_submit(task);
    if (rc != 0) {   /* as starpu_task_insert does: the task and its arguments are freed */
        task->destroy = 0;
        starpu_task_destroy(task);
    }
    if (rc == -ENODEV)
        return nnt_fail(ctx, NNT_E_UNSUPPORTED, "%s: no worker can run this task", cl->name);
    if (rc != 0)
        return nnt_fail(ctx, NNT_E_RUNTIME, "%s: task submission failed: %s", cl->name,
                        strerror(-rc));
    return NNT_OK;
}
