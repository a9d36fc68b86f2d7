/* SPDX-License-Identifier: MIT */
/* Task submission shared by the codelets: argument blocks, any number of buffers, and the
 * mapping of StarPU's errors to NNT_E_*. */
#include "../internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* NNT_E_NOMEM when the tiles of one task exceed the RAM budget: StarPU would wait forever
 * for memory that can never be freed. */
static int check_task_fits(nnt_ctx *ctx, struct starpu_codelet *cl, int nbuf,
                           const struct starpu_data_descr *bufs)
{
    if (ctx->ram_budget <= 0)
        return NNT_OK;
    int64_t bytes = 0;
    for (int i = 0; i < nbuf; i++)
        bytes += (int64_t)starpu_data_get_size(bufs[i].handle);
    if (bytes <= ctx->ram_budget)
        return NNT_OK;
    return nnt_fail(ctx, NNT_E_NOMEM, "%s: one task needs %.2f MiB of tiles but the RAM budget "
                    "is %.0f MiB; use smaller tiles or a larger mem_cpu_mib", cl->name,
                    (double)bytes / 1048576.0, (double)ctx->ram_budget / 1048576.0);
}

int nnt_submit(nnt_ctx *ctx, struct starpu_codelet *cl, int nbuf,
               const struct starpu_data_descr *bufs, const void *args, size_t args_size)
{
    int rc = check_task_fits(ctx, cl, nbuf, bufs);
    if (rc)
        return rc;
    for (int i = 0; i < nbuf; i++)
        if (bufs[i].mode & STARPU_W)
            nnt_handle_written(bufs[i].handle);
    void *copy = malloc(args_size ? args_size : 1);   /* freed by StarPU with the task */
    if (!copy)
        return nnt_fail(ctx, NNT_E_NOMEM, "%s: out of host memory", cl->name);
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
